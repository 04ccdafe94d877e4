// The API calls' own counters, which make the ids of barriers, groups and process-set calls:
// every rank (of a set, for the per-set ones) counts the same calls in the same order, by the
// callers' contract, so the ids agree without asking anyone.
//
// Threads: any; a mutex of its own, a leaf of the runtime's lock order (work_state.h).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

namespace hvrun::detail {

class CallCounters {
 public:
  // Counts from 0: the first barrier of a set is barrier 0.
  uint64_t next_barrier_id(uint32_t process_set) {
    std::lock_guard<std::mutex> lock(mutex_);
    return barriers_[process_set]++;
  }
  // Counts from 1.
  uint64_t next_group_id(uint32_t process_set) {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++groups_[process_set];
  }
  // add/remove_process_set calls, counted alike on every rank; from 1.
  uint64_t next_process_set_call() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++process_set_calls_;
  }

 private:
  std::mutex mutex_;
  std::map<uint32_t, uint64_t> barriers_;  // per process set: only its members count
  std::map<uint32_t, uint64_t> groups_;
  uint64_t process_set_calls_ = 0;
};

}  // namespace hvrun::detail
