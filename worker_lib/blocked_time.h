// How long a rank's trainer threads were blocked in hvrun: in waits on handles not done yet, in
// blocking collectives (the fast path's included) and in sending or running, before a wait, what
// the rank held back. The step timer reads it at every step and phase boundary
// (worker_lib/telemetry/step_timer.h); the coordinator finds each step's late rank from it.
//
// Cost: add() is one relaxed atomic add, from paths that already read the clock or were about
// to block. Shared (shared_ptr) between the runtime and the handles it created, so a wait that
// outlives the worker still has somewhere to count.
//
// Waits on several threads at once each count in full. Frameworks whose executors wait for a
// completion callback (TensorFlow's asynchronous kernels) count each op's submission to its
// completion (Handle::count_wait_since).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hvrun::detail {

class BlockedTime {
 public:
  using Clock = std::chrono::steady_clock;

  void add(Clock::time_point start, Clock::time_point end) {
    if (end > start)
      ns_.fetch_add(static_cast<uint64_t>(
                        std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()),
                    std::memory_order_relaxed);
  }
  uint64_t total_ns() const { return ns_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> ns_{0};
};

}  // namespace hvrun::detail
