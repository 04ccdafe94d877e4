// Polling a condition that has no descriptor or wake-up to wait on (a process's state in /proc,
// a thread's system call), bounded.
#pragma once

#include <chrono>
#include <thread>

namespace hvrun::test {

// Checks `done()` every `every` until it holds or `timeout` passes; returns whether it held.
template <typename Done>
bool poll_until(Done done, std::chrono::milliseconds timeout, std::chrono::microseconds every) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(every);
  }
  return true;
}

}  // namespace hvrun::test
