// A view of the job's key-value store under a prefix: a process set's data planes bootstrap
// with the same keys as the global set's (Gloo's addresses, NCCL's unique id, shm's segment
// handshake) without meeting them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "worker_lib/kv_store.h"

namespace hvrun::detail {

class PrefixedStore final : public KeyValueStore {
 public:
  PrefixedStore(KeyValueStore& store, std::string prefix)
      : store_(store), prefix_(std::move(prefix)) {}

  Status set(const std::string& key, const std::string& value) override {
    return store_.set(prefix_ + key, value);
  }
  Status set_many(const Entries& entries) override {
    Entries prefixed;
    prefixed.reserve(entries.size());
    for (const auto& [key, value] : entries) prefixed.emplace_back(prefix_ + key, value);
    return store_.set_many(prefixed);
  }
  Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout) override {
    std::vector<std::string> prefixed;
    prefixed.reserve(keys.size());
    for (const std::string& key : keys) prefixed.push_back(prefix_ + key);
    return store_.get(prefixed, timeout);
  }

 private:
  KeyValueStore& store_;
  std::string prefix_;
};

}  // namespace hvrun::detail
