// Gloo's rendezvous Store on top of hvrun's KeyValueStore (the coordinator's KvSet/KvGet).
// Gloo expects exceptions from its store; they are caught where the backend is made.
#pragma once

#include <chrono>

#include <gloo/rendezvous/store.h>

#include "worker_lib/kv_store.h"

namespace hvrun::detail {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(KeyValueStore& store, std::chrono::milliseconds default_timeout)
      : store_(store), default_timeout_(default_timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, default_timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  KeyValueStore& store_;
  std::chrono::milliseconds default_timeout_;
};

}  // namespace hvrun::detail
