// A key-value store in a directory every rank of one host sees: enough to bootstrap a
// shared-memory segment without a coordinator (the benchmarks that run the data plane raw).
// Values are written to a temporary file and renamed (atomic).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "worker_lib/kv_store.h"

namespace hvrun::bench {

class DirectoryStore final : public hvrun::detail::KeyValueStore {
 public:
  explicit DirectoryStore(std::string dir);
  hvrun::Status set(const std::string& key, const std::string& value) override;
  hvrun::Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                              std::chrono::milliseconds timeout) override;

 private:
  std::string file(std::string key) const;
  std::string dir_;
};

}  // namespace hvrun::bench
