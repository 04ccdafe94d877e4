#include "worker_lib/runtime/one_shot_timer.h"

#include <sys/timerfd.h>
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
  fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  if (fd_ < 0)
    return internal_error(std::string("timerfd_create: ") + std::strerror(errno) +
                          " (the worker's batch timer; the process may be out of descriptors)");
  thread_ = start_named_thread(thread_name, [this] { run(); });
  return Status::ok();
}

void OneShotTimer::arm(std::chrono::steady_clock::time_point deadline) {
  if (fd_ < 0) return;
  const itimerspec spec = at(deadline);
  (void)::timerfd_settime(fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void OneShotTimer::disarm() {
  if (fd_ < 0) return;
  const itimerspec none{};
  (void)::timerfd_settime(fd_, 0, &none, nullptr);
}

void OneShotTimer::stop() {
  if (fd_ < 0) return;
  if (thread_.joinable()) {
    stopping_.store(true);
    arm(std::chrono::steady_clock::time_point{});  // long past: fires at once
    thread_.join();
  }
  ::close(fd_);
  fd_ = -1;
}

void OneShotTimer::run() {
  while (true) {
    uint64_t expirations = 0;
    const ssize_t n = ::read(fd_, &expirations, sizeof expirations);
    if (stopping_.load()) return;
    if (n == static_cast<ssize_t>(sizeof expirations)) fire_();
    // EINTR: read again. Any other error cannot happen on a valid timerfd.
  }
}

}  // namespace hvrun::detail
