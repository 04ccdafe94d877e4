// In-process ranks for worker tests: threads, each with its own Gloo backend, bootstrapped
// through an in-memory key-value store (every wait bounded).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "worker_lib/backends/gloo/gloo_backend.h"
#include "worker_lib/backends/gloo/kv_store_adapter.h"

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

// Runs fn(backend) on `size` threads, one backend per rank.
inline void run_ranks(int size, const std::function<void(Backend&)>& fn) {
  MemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      GlooStoreAdapter adapter(store, std::chrono::seconds(20));
      auto backend = make_gloo_backend({.rank = r, .size = size, .connect_timeout = std::chrono::seconds(20),
                                        .timeout = std::chrono::seconds(20)},
                                       adapter);
      ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
      fn(**backend);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace hvrun::detail
