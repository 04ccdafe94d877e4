// DeadlineWatch: fails a TensorFlow op whose collective has not completed within the worker's
// operation timeout (--op-timeout), so that a rank that never submits a tensor makes the
// others raise instead of waiting for ever (the asynchronous kernels never wait themselves).
//
// One thread of its own sleeps until the earliest deadline and runs that entry's expiry; an
// entry is cancelled when its op finishes first. Expiry callbacks must not block.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace hvrun::tensorflow_ops {

class DeadlineWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // The process's watch (never destroyed: its thread may outlive static destructors).
  static DeadlineWatch& of_process();

  // Runs `expire` at `deadline` unless cancel(id) came first. Returns the entry's id.
  uint64_t add(Clock::time_point deadline, std::function<void()> expire);
  void cancel(uint64_t id);

 private:
  DeadlineWatch();
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  uint64_t next_id_ = 1;                                               // guarded by mutex_
  std::set<std::pair<Clock::time_point, uint64_t>> by_deadline_;       // guarded by mutex_
  std::map<uint64_t, std::pair<Clock::time_point, std::function<void()>>> entries_;  // mutex_
  std::thread thread_;
};

}  // namespace hvrun::tensorflow_ops
