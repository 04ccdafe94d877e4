// A timer that runs a callback at a deadline on a thread of its own, which sleeps until then:
// the submitter arms it for a batch of asynchronous submissions (the background thread must
// send them a cycle later if no caller waits for them first) and disarms it when a caller took
// the batch, so that a step whose trainer waits at once wakes no thread at all (a wake-up
// takes a core from a rank's reduction on a host with a core per rank).
//
// Threads: arm() / disarm() from any thread; the callback runs on the timer's thread.
#pragma once

#include <sys/timerfd.h>

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

#include "common/status.h"

namespace hvrun::detail {

class OneShotTimer {
 public:
  explicit OneShotTimer(std::function<void()> fire) : fire_(std::move(fire)) {}
  ~OneShotTimer();
  OneShotTimer(const OneShotTimer&) = delete;
  OneShotTimer& operator=(const OneShotTimer&) = delete;

  // Creates the timer and its thread (named `thread_name`).
  Status start(const char* thread_name);
  // Runs the callback once at `deadline` (replacing an earlier deadline). Before start() or
  // after stop(): no-op.
  void arm(std::chrono::steady_clock::time_point deadline);
  void disarm();
  // Ends the thread (the destructor does too); a pending deadline never fires.
  void stop();

 private:
  void set(const itimerspec& spec, int flags);  // mutex_ held
  void run();

  std::function<void()> fire_;
  // Guards fd_ and stopping_: a disarm() racing stop() must not cancel the expiry that ends the
  // thread.
  std::mutex mutex_;
  int fd_ = -1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace hvrun::detail
