// In-process ranks for worker tests: threads acting as ranks, each with its own backend (Gloo
// over loopback TCP, or shm over one segment of a made-up job), bootstrapped through an
// in-memory key-value store. Every wait is bounded.
#pragma once

#include <chrono>
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
    return values;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
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
