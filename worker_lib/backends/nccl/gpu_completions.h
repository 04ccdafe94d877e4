// The responses the GPU executor queued and has not finished: each one's completion token
// (device_plane.h), polled in queue order on a thread of its own, so that the thread queuing the
// work (the background thread, or a thread running a round the ranks agreed on) never waits for
// the GPU: the next response's pack, NCCL call and unpack are queued while this one runs.
//
// A response finishes (its `finish` gets the handles' status) when its token completes, or with
// the plane's failure: NCCL's asynchronous error, the job's abort, its deadline (the op timeout,
// counted from when it could start running: its queuing, or the end of the response before
// it). A failure first goes to `on_failure`, which has the plane's owner abort the communicator
// (device_plane.h: a poller only sees the failure), then to `finish`; the other tokens of that
// plane fail with it. Tokens of one plane complete in order (one stream), so only the oldest is
// polled.
//
// Threads: track() and drain() from any thread; the poller thread ("hvrun-gpu-done") starts
// with the first tracked response (a job without CUDA tensors has none) and ends with the
// object, which drains first. `finish` runs on the poller: the handles' completion, and so a
// handle's on_complete callback, run there.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "worker_lib/backends/nccl/device_plane.h"

namespace hvrun::detail {

class GpuCompletions {
 public:
  struct Queued {
    cuda::DevicePlane* plane = nullptr;  // outlives the response (the executor drains first)
    uint64_t token = 0;
    std::string what;  // "allreduce of 'a', 'b'", for the failure
    std::chrono::steady_clock::time_point queued_at;
    std::chrono::milliseconds op_timeout{0};
    std::function<void(Status)> finish;
  };
  // `on_failure(what)`: a token failed; the plane's owner makes the failure its own.
  explicit GpuCompletions(std::function<void(const std::string& what)> on_failure);
  ~GpuCompletions();
  GpuCompletions(const GpuCompletions&) = delete;
  GpuCompletions& operator=(const GpuCompletions&) = delete;

  void track(Queued queued);
  // Returns once every response tracked so far finished (each is bounded by its deadline).
  // On the poller thread itself (a handle's callback) it returns at once: it cannot wait for
  // the response it is finishing.
  void drain();
  // Responses queued and not finished (tests).
  size_t in_flight() const;

 private:
  void run();

  const std::function<void(const std::string&)> on_failure_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Queued> queue_;  // mutex_; the front is polled
  size_t finishing_ = 0;      // mutex_: taken off the queue, its finish still running
  bool stopping_ = false;     // mutex_
  std::thread thread_;        // started by the first track()
};

}  // namespace hvrun::detail
