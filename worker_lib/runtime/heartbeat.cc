#include "worker_lib/runtime/heartbeat.h"

#include <algorithm>

#include "worker_lib/runtime/named_thread.h"

namespace hvrun::detail {

std::chrono::milliseconds Heartbeat::interval_for(std::chrono::milliseconds coordinator_timeout) {
  return std::clamp(coordinator_timeout / 10, std::chrono::milliseconds(20),
                    std::chrono::milliseconds(1000));
}

void Heartbeat::start() {
  thread_ = start_named_thread("hvrun-heartbeat", [this] { beat(); });
}

void Heartbeat::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
}

void Heartbeat::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [&] { return stop_; })) {
    lock.unlock();
    v1::WorkerMessage message;
    message.mutable_heartbeat()->set_last_plan_seq(finished_plan_seq_.load());
    const bool sent = stream_.write(message);
    lock.lock();
    if (!sent) break;  // the stream is closed; the reader reports why
  }
}

}  // namespace hvrun::detail
