// A worker's death seen as it begins, not when it can be reaped: a process killed while it holds
// a large address space (PyTorch's CUDA build maps gigabytes) is torn down by the kernel for tens
// of milliseconds, and a GPU process for longer, before its sockets close and waitpid() sees it.
// The kernel releases a dying thread's robust mutexes first of all (its robust futex list), so a
// launcher waiting on a mutex the worker holds learns of the death at once, and reads the exit
// status the kernel already set (proc_state.h, read_exiting_status).
//
// The launcher makes one shared-memory segment of slots, one per worker it starts, and tells each
// worker its slot through HVRUN_DEATH_WATCH ("<segment name>:<slot>"). From init() to shutdown()
// the worker library keeps the slot's robust, process-shared mutex locked on a thread of its own
// (so that no other thread's end releases it) and bumps `held` each time it takes it; a clean
// shutdown unlocks it. The launcher's watcher locks it after each bump: EOWNERDEAD means the
// worker died inside the job; 0 means it shut down (it may init() again: an elastic reset).
#pragma once

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "common/status.h"

namespace hvrun::death_watch {

inline constexpr const char* kEnvironmentVariable = "HVRUN_DEATH_WATCH";

struct alignas(64) Slot {
  pthread_mutex_t mutex;           // robust, process-shared
  std::atomic<uint32_t> held{0};   // bumped by the worker each time it locks `mutex`
};

// A mapping of the segment (the launcher's, made with create(); a worker's, with open()).
class Segment {
 public:
  // Makes /dev/shm/<name> with `slots` slots, every mutex initialised.
  static Result<Segment> create(const std::string& name, size_t slots);
  // Maps the segment a launcher made.
  static Result<Segment> open(const std::string& name);
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  size_t slots() const { return slots_; }
  Slot& slot(size_t index) { return base_[index]; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, Slot* base, size_t slots) : name_(std::move(name)), base_(base), slots_(slots) {}
  std::string name_;
  Slot* base_ = nullptr;
  size_t slots_ = 0;
};

// HVRUN_DEATH_WATCH's value, "name:slot", as (name, slot).
Result<std::pair<std::string, size_t>> parse_assignment(const std::string& value);

// Waits at most `timeout` while `word` still reads `expected` (FUTEX_WAIT on shared memory).
void wait_while_equal(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::milliseconds timeout);
// Wakes every waiter of `word`.
void wake_all(std::atomic<uint32_t>& word);

}  // namespace hvrun::death_watch
