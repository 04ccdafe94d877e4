#include "worker_lib/backends/nccl/gpu_completions.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "worker_lib/backends/nccl/poll_backoff.h"

namespace hvrun::detail {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

GpuCompletions::GpuCompletions(std::function<void(const std::string&)> on_failure)
    : on_failure_(std::move(on_failure)) {}

GpuCompletions::~GpuCompletions() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GpuCompletions::track(Queued queued) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(queued));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
}

void GpuCompletions::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (std::this_thread::get_id() == thread_.get_id()) return;
  changed_.wait(lock, [this] { return queue_.empty() && finishing_ == 0; });
}

size_t GpuCompletions::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size() + finishing_;
}

void GpuCompletions::run() {
  pthread_setname_np(pthread_self(), "hvrun-gpu-done");  // as the runtime names its threads
  cuda::PollBackoff pause;
  // When the front response could start running: the end of the one before it, or its queuing.
  Clock::time_point previous_end = Clock::now();
  bool front_new = true;
  Clock::time_point deadline;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    Queued& front = queue_.front();
    if (front_new) {
      deadline = std::max(front.queued_at, previous_end) + front.op_timeout;
      pause.restart();
      front_new = false;
    }
    cuda::DevicePlane* plane = front.plane;
    const uint64_t token = front.token;
    const std::string& what = front.what;
    lock.unlock();
    // The front stays queued while polled: only this thread pops, so `what` stays valid.
    std::optional<Status> done = plane->poll_completion(token, what, deadline);
    lock.lock();
    if (!done) {
      lock.unlock();
      pause.pause();
      lock.lock();
      continue;
    }
    Queued finished = std::move(queue_.front());
    queue_.pop_front();
    ++finishing_;
    lock.unlock();
    previous_end = Clock::now();
    front_new = true;
    finished.plane->release_completion(finished.token);
    if (!done->is_ok()) on_failure_(finished.what);
    finished.finish(std::move(*done));
    lock.lock();
    --finishing_;
    changed_.notify_all();
  }
}

}  // namespace hvrun::detail
