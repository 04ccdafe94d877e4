// A key-value store every rank of the job shares (the coordinator's, in a job): how backends
// bootstrap their own connections (Gloo's addresses, NCCL's unique id).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hvrun::detail {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual Status set(const std::string& key, const std::string& value) = 0;
  // Several keys at once (one request where the store is remote).
  using Entries = std::vector<std::pair<std::string, std::string>>;
  virtual Status set_many(const Entries& entries) {
    for (const auto& [key, value] : entries) HVRUN_RETURN_IF_ERROR(set(key, value));
    return Status::ok();
  }
  // Waits until every key exists; kDeadlineExceeded naming the missing keys after `timeout`.
  virtual Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout) = 0;
};

}  // namespace hvrun::detail
