// This worker's side of the launcher's death watch (common/death_watch.h): from init() to
// shutdown() a thread of its own holds the slot's robust mutex, so that the kernel releases it,
// and the launcher hears of this process's death, the moment the death begins. A thread of its
// own because the mutex is released when the thread that locked it ends, and the threads that
// call init() (a trainer's, any) may end before the worker does.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/death_watch.h"
#include "common/status.h"

namespace hvrun::detail {

class DeathWatchHolder {
 public:
  // Takes slot `assignment` ("<segment>:<slot>", Config::death_watch); returns once it holds it.
  static Result<std::unique_ptr<DeathWatchHolder>> hold(const std::string& assignment);
  // Lets the slot go (a clean shutdown: the launcher sees no death) and ends the thread.
  ~DeathWatchHolder();

 private:
  DeathWatchHolder(death_watch::Segment segment, size_t slot)
      : segment_(std::move(segment)), slot_(slot) {}
  void run();

  death_watch::Segment segment_;
  size_t slot_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool holding_ = false;  // mutex_
  bool releasing_ = false;  // mutex_
  Status failure_;          // mutex_: why the slot could not be taken
  std::thread thread_;
};

}  // namespace hvrun::detail
