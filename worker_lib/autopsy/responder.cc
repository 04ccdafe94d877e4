#include "worker_lib/autopsy/responder.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "common/logging.h"
#include "common/proc_state.h"
#include "worker_lib/autopsy/interpreter_stacks.h"
#include "worker_lib/autopsy/symbolizer.h"
#include "worker_lib/autopsy/thread_stacks.h"

namespace hvrun::detail {
namespace {

// Shares of the request's deadline: the rest is symbolising and sending.
constexpr double kNativeShare = 0.15;
constexpr double kInterpreterShare = 0.35;
constexpr std::chrono::milliseconds kLeast{20};

std::chrono::milliseconds share(const v1::AutopsyRequest& request, double part) {
  const int64_t total = request.deadline_ms() > 0 ? request.deadline_ms() : 3000;
  return std::max(kLeast, std::chrono::milliseconds(static_cast<int64_t>(total * part)));
}

}  // namespace

v1::AutopsyReport build_autopsy_report(const v1::AutopsyRequest& request,
                                       const FlightRecorder* recorder, int rank,
                                       const std::string& host) {
  v1::AutopsyReport report;
  report.set_id(request.id());
  report.set_rank(rank);
  report.set_host(host);
  report.set_pid(::getpid());
  if (recorder != nullptr) {
    report.set_recorder_capacity(recorder->capacity());
    report.set_recorded_total(recorder->recorded());
    for (v1::FlightRecord& record : recorder->snapshot()) {
      if (record.state() == "submitted" || record.state() == "running")
        *report.add_waiting() = record;
      *report.add_ring() = std::move(record);
    }
  }
  // The kernel's view first: the capture signal interrupts (and restarts) the system calls.
  const pid_t pid = ::getpid();
  std::map<pid_t, v1::AutopsyThread*> by_tid;
  for (pid_t tid : list_tasks(pid)) {
    std::optional<TaskState> state = read_task_state(pid, tid);
    if (!state) continue;
    v1::AutopsyThread* thread = report.add_threads();
    thread->set_tid(tid);
    thread->set_name(state->name);
    thread->set_state(std::string(1, state->letter));
    thread->set_wchan(state->wchan);
    thread->set_syscall(state->syscall);
    by_tid[tid] = thread;
  }
  Symbolizer symbolizer;
  for (const NativeStack& stack : capture_native_stacks(share(request, kNativeShare))) {
    auto it = by_tid.find(stack.tid);
    if (it == by_tid.end()) continue;
    if (!stack.note.empty()) it->second->set_note(stack.note);
    for (v1::AutopsyFrame& frame : symbolizer.frames(stack.pcs))
      *it->second->add_native_frames() = std::move(frame);
  }
  const InterpreterStacks python = interpreter_stacks(share(request, kInterpreterShare));
  if (!python.note.empty()) report.set_note(python.note);
  for (const InterpreterThread& t : python.threads) {
    auto it = by_tid.find(static_cast<pid_t>(t.native_thread_id));
    v1::AutopsyThread* thread = it != by_tid.end() ? it->second : report.add_threads();
    if (it == by_tid.end()) thread->set_tid(t.native_thread_id);
    if (!t.name.empty()) thread->set_name(thread->name() + " (Python thread " + t.name + ")");
    for (const InterpreterFrame& f : t.frames) {
      v1::AutopsyFrame* frame = thread->add_python_frames();
      frame->set_function(f.function);
      frame->set_file(f.file);
      frame->set_line(f.line);
    }
  }
  return report;
}

AutopsyResponder::AutopsyResponder(Context context) : c_(std::move(context)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvrun-autopsy");
    run();
  });
}

void AutopsyResponder::request(const v1::AutopsyRequest& request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    requests_.push_back(request);
  }
  wake_.notify_one();
}

void AutopsyResponder::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void AutopsyResponder::run() {
  for (;;) {
    v1::AutopsyRequest request;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !requests_.empty(); });
      if (stopping_) return;
      request = std::move(requests_.front());
      requests_.pop_front();
    }
    SPDLOG_INFO("autopsy {}: {}; reporting this rank's collectives and stacks", request.id(),
                request.reason());
    v1::WorkerMessage message;
    *message.mutable_autopsy() =
        build_autopsy_report(request, c_.recorder, c_.rank, c_.host);
    if (!c_.send(message)) SPDLOG_DEBUG("autopsy report not sent: the stream is closed");
  }
}

}  // namespace hvrun::detail
