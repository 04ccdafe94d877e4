// How a thread polls for GPU work to finish (an event, a non-blocking NCCL call): it yields for
// the first ~200 us (a step's collective often takes that little, and the poll's latency is the
// step's), then sleeps 50 us between polls so that a long wait costs no core. Header-only: the
// CUDA plugin and libhvrun's GPU executor both poll this way.
#pragma once

#include <chrono>
#include <thread>

namespace hvrun::detail::cuda {

class PollBackoff {
 public:
  void pause() {
    if (Clock::now() - start_ < std::chrono::microseconds(200)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  // A new wait begins: yield again first.
  void restart() { start_ = Clock::now(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_ = Clock::now();
};

}  // namespace hvrun::detail::cuda
