// The heartbeat thread (`hvrun-heartbeat`): sends Heartbeat{last finished plan} every interval
// (a tenth of the coordinator's heartbeat timeout, at most 1 s), even while the background
// thread is inside a long collective; the coordinator aborts the job when a rank falls silent.
// It has its own lock and wake-up (a leaf in work_state.h's order): waking it on every submission
// would cost the busy path a context switch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "worker_lib/runtime/coordinator_client.h"

namespace hvrun::detail {

class Heartbeat {
 public:
  // Often enough that the coordinator's timeout never fires on a live worker.
  static std::chrono::milliseconds interval_for(std::chrono::milliseconds coordinator_timeout);

  Heartbeat(NegotiationStream& stream, std::chrono::milliseconds interval,
            const std::atomic<uint64_t>& finished_plan_seq)
      : stream_(stream), interval_(interval), finished_plan_seq_(finished_plan_seq) {}

  void start();
  // Any thread: no more heartbeats (the stream ended, or shutdown). Does not join.
  void stop();
  void join() { thread_.join(); }

 private:
  void beat();

  NegotiationStream& stream_;
  const std::chrono::milliseconds interval_;
  const std::atomic<uint64_t>& finished_plan_seq_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;  // mutex_
  std::thread thread_;
};

}  // namespace hvrun::detail
