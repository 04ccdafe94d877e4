#include "worker_lib/autopsy/interpreter_stacks.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace hvrun {
namespace {

// The registered provider: process-wide, as the interpreter it reads is.
std::mutex g_provider_mutex;
std::shared_ptr<const InterpreterStackProvider> g_provider;  // guarded by g_provider_mutex
std::atomic<bool> g_call_blocked{false};  // a call that missed its deadline has not returned

struct PendingCall {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;  // guarded by mutex
  std::vector<InterpreterThread> threads;
};

}  // namespace

void set_interpreter_stack_provider(InterpreterStackProvider provider) {
  std::lock_guard<std::mutex> lock(g_provider_mutex);
  g_provider = provider ? std::make_shared<const InterpreterStackProvider>(std::move(provider))
                        : nullptr;
}

namespace detail {

InterpreterStacks interpreter_stacks(std::chrono::milliseconds deadline) {
  InterpreterStacks result;
  std::shared_ptr<const InterpreterStackProvider> provider;
  {
    std::lock_guard<std::mutex> lock(g_provider_mutex);
    provider = g_provider;
  }
  if (!provider) return result;
  result.provided = true;
  if (g_call_blocked.load()) {
    result.note = "no interpreter stacks: an earlier request for them is still blocked (a "
                  "thread holds the interpreter's lock, Python's GIL, and does not release it)";
    return result;
  }
  auto call = std::make_shared<PendingCall>();
  std::thread([call, provider] {
    std::vector<InterpreterThread> threads = (*provider)();
    {
      std::lock_guard<std::mutex> lock(call->mutex);
      call->threads = std::move(threads);
      call->done = true;
      // Under the mutex: a waiter that gave up marked the call blocked under it, before this.
      g_call_blocked.store(false);
    }
    call->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(call->mutex);
  if (!call->done_cv.wait_for(lock, deadline, [&] { return call->done; })) {
    g_call_blocked.store(true);
    result.note = "no interpreter stacks: the interpreter did not answer within " +
                  std::to_string(deadline.count()) +
                  " ms (a thread holds Python's GIL and does not release it: see the native "
                  "stacks)";
    return result;
  }
  result.threads = std::move(call->threads);
  return result;
}

}  // namespace detail
}  // namespace hvrun
