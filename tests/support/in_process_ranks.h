// In-process ranks for worker tests: threads acting as ranks, each with its own backend (Gloo
// over loopback TCP, or shm over one segment of a made-up job), bootstrapped through an
// in-memory key-value store. Every wait is bounded.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "worker_lib/backend.h"
#include "worker_lib/kv_store.h"

namespace hvrun::detail {

class MemoryStore final : public KeyValueStore {
 public:
  Status set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      data_[key] = value;
    }
    cv_.notify_all();
    return Status::ok();
  }
  Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    bool ok = cv_.wait_for(lock, timeout, [&] {
      for (const auto& k : keys)
        if (!data_.count(k)) return false;
      return true;
    });
    if (!ok) return deadline_exceeded("keys missing");
    std::vector<std::string> values;
    for (const auto& k : keys) values.push_back(data_[k]);
    ++reads_;
    for (const auto& v : values) bytes_read_ += v.size();
    return values;
  }

  // What get() served so far: calls, and value bytes in all; keys and values set.
  uint64_t reads() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reads_;
  }
  uint64_t bytes_read() {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_read_;
  }
  size_t keys_under(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (const auto& entry : data_) n += entry.first.starts_with(prefix) ? 1 : 0;
    return n;
  }
  // The largest value set under a key starting with `prefix`.
  size_t largest_value(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t largest = 0;
    for (const auto& [k, v] : data_)
      if (k.starts_with(prefix)) largest = std::max(largest, v.size());
    return largest;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
  uint64_t reads_ = 0;
  uint64_t bytes_read_ = 0;
};

// Runs fn(backend) on `size` threads, one Gloo backend per rank (20 s timeouts).
void run_ranks(int size, const std::function<void(Backend&)>& fn);

// A job id no other test of this process (or another process) uses: its shm segment is its own.
std::string fresh_job_id();

struct ShmRanks {
  std::string job_id = fresh_job_id();
  size_t chunk_bytes = 1 << 20;
  std::chrono::milliseconds timeout{20000};
};

// Runs fn(backend) on `size` threads, each with its own shm backend of the job `ranks.job_id`
// on host "testhost"; then checks that the job's segment is gone from /dev/shm.
void run_shm_ranks(int size, const ShmRanks& ranks, const std::function<void(Backend&)>& fn);

}  // namespace hvrun::detail
