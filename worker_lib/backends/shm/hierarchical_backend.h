// Multi-host CPU jobs: shared memory within each host, Gloo across hosts between one rank per
// host. allreduce = shm allreduce on the host, Gloo allreduce among the hosts' leaders (the
// lowest global rank of each host), shm broadcast from the leader; float16/bfloat16 are widened
// to float32 first, so the whole reduction accumulates in float32 and rounds once. Every rank
// ends with the leaders' bits, which Gloo's allreduce makes identical. broadcast and barrier go
// the same three stages (the root's host, the leaders, every other host). The leaders' mesh is
// sparse (gloo/mesh_bootstrap.h: pairs only with leaders 2^k apart), all these three need.
// allgatherv and alltoallv move rank-ordered data across hosts and run on a Gloo mesh of every
// rank, which is connected on their first call, not at start: its N^2 connections and key reads
// are paid only by a job that uses them (every rank runs the same plans in the same order, so
// every rank makes that first call together).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "worker_lib/backend.h"

namespace hvrun::detail {

struct HierarchicalParts {
  int rank = 0;                      // global rank
  int size = 1;                      // global size
  std::vector<int> host_of;          // every global rank's host index (hosts by lowest rank)
  std::vector<int> position_of;      // every global rank's position on its host's shm
  std::unique_ptr<Backend> host;     // shm over this host's ranks (leader = position 0)
  std::unique_ptr<Backend> leaders;  // Gloo over the hosts' leaders; null on other ranks
  // Connects the Gloo mesh of every rank (blocks until every rank did, bounded).
  std::function<Result<std::unique_ptr<Backend>>()> connect_world;
};

std::unique_ptr<Backend> make_hierarchical_backend(HierarchicalParts parts);

}  // namespace hvrun::detail
