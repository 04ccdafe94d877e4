// The Gloo CPU data plane: a full mesh of TCP pairs, bootstrapped through a key-value store
// (in a job, the coordinator's; in unit tests, an in-memory one).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker_lib/backend.h"
#include "worker_lib/kv_store.h"

namespace hvrun::detail {

struct GlooBackendOptions {
  int rank = 0;
  int size = 1;
  std::string data_address = "127.0.0.1";  // interface (address or host name) to bind
  std::string store_prefix = "gloo";       // keys this backend uses in the store
  std::chrono::milliseconds connect_timeout{30000};  // rendezvous and pair connections
  std::chrono::milliseconds timeout{300000};          // every collective
  // Pairs only with the ranks 2^k apart (mesh_bootstrap.h): allreduce, broadcast and barrier
  // work, allgatherv and alltoallv are refused. For the mesh among host leaders.
  bool sparse = false;
};

// Connects every pair of ranks (mesh_bootstrap.h; blocks until all ranks did, bounded by
// options.connect_timeout).
Result<std::unique_ptr<Backend>> make_gloo_backend(const GlooBackendOptions& options,
                                                   KeyValueStore& store);

}  // namespace hvrun::detail
