// Futex wait/wake on a 32-bit word of shared memory (process-shared: not FUTEX_PRIVATE), so a
// rank blocked on a peer sleeps in the kernel instead of spinning, and any process mapping the
// segment can wake it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace hvrun::detail::shm {

// Sleeps while *word == expected, at most `timeout`. Returns at once when the word differs;
// spurious returns are possible, so callers re-check their condition.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);

// Wakes every thread sleeping on `word` (in any process).
void futex_wake_all(std::atomic<uint32_t>* word);

// One CPU relaxation hint for spin loops.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace hvrun::detail::shm
