// Keeps Gloo's TCP event loop ticking while a backend is torn down.
//
// Gloo's loop sleeps in epoll_wait with a 10 ms timeout, and both closing a pair
// (unregisterDescriptor waits for the next tick) and destroying the device (joins the loop
// thread) wait for that tick: ~20 ms of every worker's exit for a 2-rank job, a tenth of
// hvrun's whole launch-to-exit time. Registering an always-writable eventfd makes every
// epoll_wait return at once until the waker is gone.
#pragma once

namespace gloo::transport::tcp {
class Device;
}

namespace hvrun::detail {

class LoopWaker {
 public:
  // Registers with `device`'s loop (null: inert); on any failure the waker is inert (teardown is then only
  // slower, never wrong).
  explicit LoopWaker(gloo::transport::tcp::Device* device);
  ~LoopWaker();  // closing the eventfd removes it from the loop's epoll set

  LoopWaker(const LoopWaker&) = delete;
  LoopWaker& operator=(const LoopWaker&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace hvrun::detail
