// What a CUDA stream and its events are to the host plane (host_device_plane.h): an ordered
// queue of host work run by one thread, and events that complete when everything queued before
// them ran.
//
// A HostStream stands in for a cudaStream_t: the host plane's own internal stream is one, and a
// program running on the host plane (tests, CPU proofs) may pass a HostStream* wherever the API
// takes a CUDA stream; nullptr is the legacy default stream, whose work is always done (the
// caller's host memory is ready when it submits).
//
// Threads: enqueue(), record() and wait() from any thread; the work runs on the stream's own
// thread, in call order. interrupt() (any thread) makes every wait() already queued or queued
// later return at once, as an aborted NCCL communicator releases the streams it held.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace hvrun::detail::cuda {

// Completes once; waiters are woken. Shared by the stream that records it and those that wait.
class HostEvent {
 public:
  void complete();
  bool done() const;
  // True when completed within `timeout`.
  bool wait_for(std::chrono::nanoseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool done_ = false;  // mutex_
};

class HostStream {
 public:
  explicit HostStream(std::string name);
  // Runs what is queued, its waits cut short (as interrupt()), then stops the thread.
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void enqueue(std::function<void()> work);
  // An event that completes when everything queued so far ran (cudaEventRecord).
  std::shared_ptr<HostEvent> record();
  // Later work runs only after `event` completed (cudaStreamWaitEvent), or after interrupt().
  void wait(std::shared_ptr<HostEvent> event);
  void interrupt();

 private:
  void run();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // mutex_
  bool stopping_ = false;                    // mutex_
  bool interrupted_ = false;                 // mutex_
  std::thread thread_;
};

}  // namespace hvrun::detail::cuda
