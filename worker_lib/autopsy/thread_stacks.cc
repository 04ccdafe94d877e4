#include "worker_lib/autopsy/thread_stacks.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/proc_state.h"

namespace hvrun::detail {
namespace {

constexpr int kMaxFrames = 64;
constexpr size_t kMaxThreads = 1024;

// What the handler writes: one slot per thread asked, found by its tid. Preallocated (static),
// so the handler allocates nothing and takes no lock.
struct Slot {
  std::atomic<pid_t> tid{0};
  std::atomic<int> depth{-1};  // -1 = not answered yet
  void* frames[kMaxFrames];
};
Slot g_slots[kMaxThreads];
std::atomic<size_t> g_slot_count{0};

pid_t this_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

int capture_signal() { return SIGRTMIN + 7; }

void on_capture_signal(int, siginfo_t*, void*) {
  const int saved_errno = errno;
  const pid_t me = this_tid();
  const size_t count = g_slot_count.load(std::memory_order_acquire);
  for (size_t i = 0; i < count; ++i) {
    Slot& slot = g_slots[i];
    if (slot.tid.load(std::memory_order_relaxed) != me) continue;
    if (slot.depth.load(std::memory_order_relaxed) >= 0) break;  // a late, second signal
    const int depth = ::backtrace(slot.frames, kMaxFrames);
    slot.depth.store(depth, std::memory_order_release);
    break;
  }
  errno = saved_errno;
}

// Installs the handler once; false (with `why`) when the signal belongs to the program.
bool install_handler(std::string* why) {
  static std::once_flag once;
  static bool installed = false;
  static std::string refusal;
  std::call_once(once, [] {
    // backtrace() loads the unwinder on its first call: not inside a handler.
    void* warm[2];
    (void)::backtrace(warm, 2);
    struct sigaction current{};
    if (::sigaction(capture_signal(), nullptr, &current) != 0) {
      refusal = std::string("sigaction: ") + std::strerror(errno);
      return;
    }
    const bool taken = (current.sa_flags & SA_SIGINFO) ? current.sa_sigaction != nullptr
                                                       : (current.sa_handler != SIG_DFL &&
                                                          current.sa_handler != SIG_IGN);
    if (taken) {
      refusal = "the program handles SIGRTMIN+7 itself";
      return;
    }
    struct sigaction action{};
    action.sa_sigaction = on_capture_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    // Kept installed for the process's life: a late signal must never meet the default action
    // of a real-time signal (terminate).
    if (::sigaction(capture_signal(), &action, nullptr) != 0) {
      refusal = std::string("sigaction: ") + std::strerror(errno);
      return;
    }
    installed = true;
  });
  if (!installed && why != nullptr) *why = refusal;
  return installed;
}

}  // namespace

std::vector<NativeStack> capture_native_stacks(std::chrono::milliseconds deadline) {
  static std::mutex one_capture;
  std::lock_guard<std::mutex> lock(one_capture);
  const pid_t pid = ::getpid();
  const pid_t me = this_tid();
  std::vector<pid_t> tids = list_tasks(pid);
  if (tids.size() > kMaxThreads) tids.resize(kMaxThreads);
  std::vector<NativeStack> stacks(tids.size());
  std::string why;
  const bool can_signal = install_handler(&why);

  // Publish the slots, then signal.
  g_slot_count.store(0, std::memory_order_release);
  for (size_t i = 0; i < tids.size(); ++i) {
    g_slots[i].tid.store(tids[i], std::memory_order_relaxed);
    g_slots[i].depth.store(-1, std::memory_order_relaxed);
  }
  g_slot_count.store(tids.size(), std::memory_order_release);
  std::vector<bool> sent(tids.size(), false);
  for (size_t i = 0; i < tids.size(); ++i) {
    stacks[i].tid = tids[i];
    if (tids[i] == me) continue;
    if (!can_signal) {
      stacks[i].note = "no native stack: " + why;
      continue;
    }
    sent[i] = ::syscall(SYS_tgkill, pid, tids[i], capture_signal()) == 0;
    if (!sent[i]) stacks[i].note = "no native stack: the thread ended";
  }
  // Our own stack, directly.
  for (size_t i = 0; i < tids.size(); ++i) {
    if (tids[i] != me) continue;
    void* frames[kMaxFrames];
    const int depth = ::backtrace(frames, kMaxFrames);
    for (int f = 0; f < depth; ++f) stacks[i].pcs.push_back(reinterpret_cast<uintptr_t>(frames[f]));
  }
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < tids.size(); ++i)
      if (sent[i] && g_slots[i].depth.load(std::memory_order_acquire) < 0) all = false;
    if (all || std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (size_t i = 0; i < tids.size(); ++i) {
    if (!sent[i]) continue;
    const int depth = g_slots[i].depth.load(std::memory_order_acquire);
    if (depth < 0) {
      stacks[i].note = "no native stack: the thread did not run the capture signal within " +
                       std::to_string(deadline.count()) + " ms (it blocks the signal, or it "
                       "is stopped)";
      continue;
    }
    // Frames 0 and 1 are the handler and the kernel's signal trampoline.
    for (int f = 2; f < depth; ++f)
      stacks[i].pcs.push_back(reinterpret_cast<uintptr_t>(g_slots[i].frames[f]));
  }
  // A late answer must not write a slot the next capture reuses for another thread.
  g_slot_count.store(0, std::memory_order_release);
  return stacks;
}

}  // namespace hvrun::detail
