// Multi-host CPU jobs: shared memory within each host, Gloo across hosts between one rank per
// host. allreduce = shm allreduce on the host, Gloo allreduce among the hosts' leaders (the
// lowest global rank of each host), shm broadcast from the leader; float16/bfloat16 are widened
// to float32 first, so the whole reduction accumulates in float32 and rounds once. Every rank
// ends with the leaders' bits, which Gloo's allreduce makes identical. The other collectives
// (allgatherv, broadcast, alltoallv) move rank-ordered data across hosts and run on a Gloo mesh of
// every rank.
#pragma once

#include <memory>

#include "worker_lib/backend.h"
#include "worker_lib/backends/shm/host_rounds.h"
#include "worker_lib/backends/shm/round_arbiter.h"

namespace hvrun::detail {

struct HierarchicalParts {
  int rank = 0;                      // global rank
  int size = 1;                      // global size
  std::unique_ptr<Backend> host;     // shm over this host's ranks (leader = position 0)
  std::unique_ptr<Backend> leaders;  // Gloo over the hosts' leaders; null on other ranks
  std::unique_ptr<Backend> world;    // Gloo over every rank
  // Cross-host rounds (null when off); the arbiter on rank 0 only. Declared after `host`, whose
  // segment holds the board the rounds use: they go first.
  std::unique_ptr<shm::HostRounds> rounds;
  std::unique_ptr<shm::RoundArbiter> arbiter;
};

std::unique_ptr<Backend> make_hierarchical_backend(HierarchicalParts parts);

}  // namespace hvrun::detail
