#include "worker_lib/runtime/one_shot_timer.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "worker_lib/runtime/named_thread.h"

namespace hvrun::detail {
namespace {

// steady_clock is CLOCK_MONOTONIC on Linux, the timer's clock.
itimerspec at(std::chrono::steady_clock::time_point deadline) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      deadline.time_since_epoch())
                      .count();
  itimerspec spec{};
  // A zero it_value would disarm: a deadline at the clock's epoch fires a nanosecond after it.
  spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
  spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
  if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  return spec;
}

}  // namespace

OneShotTimer::~OneShotTimer() { stop(); }

Status OneShotTimer::start(const char* thread_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  if (fd_ < 0)
    return internal_error(std::string("timerfd_create: ") + std::strerror(errno) +
                          " (the worker's batch timer; the process may be out of descriptors)");
  thread_ = start_named_thread(thread_name, [this] { run(); });
  return Status::ok();
}

void OneShotTimer::set(const itimerspec& spec, int flags) {
  if (fd_ >= 0 && !stopping_) (void)::timerfd_settime(fd_, flags, &spec, nullptr);
}

void OneShotTimer::arm(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mutex_);
  set(at(deadline), TFD_TIMER_ABSTIME);
}

void OneShotTimer::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  set(itimerspec{}, 0);
}

void OneShotTimer::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0 || stopping_) return;
    // Long past: the thread's read returns at once and sees stopping_.
    set(at(std::chrono::steady_clock::time_point{}), TFD_TIMER_ABSTIME);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  ::close(fd_);
  fd_ = -1;
}

void OneShotTimer::run() {
  while (true) {
    uint64_t expirations = 0;
    const ssize_t n = ::read(fd_, &expirations, sizeof expirations);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
    }
    if (n == static_cast<ssize_t>(sizeof expirations)) fire_();
    // EINTR: read again. Any other error cannot happen on a valid timerfd.
  }
}

}  // namespace hvrun::detail
