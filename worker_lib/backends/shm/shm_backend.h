// The shared-memory CPU data plane for the ranks of a job that share a host: every collective
// goes through one POSIX segment per host (shm_segment.h) instead of TCP loopback.
//
// Algorithms (shm_backend.cc): allreduce copies cache-sized chunks into each rank's slot, then
// every rank reduces its own 1/n of the chunk from all slots (reduce-scatter, in parallel across
// ranks) and copies every rank's reduced part out (allgather); buffers up to a few KiB take a
// latency path with one barrier, where each rank reduces the whole buffer itself. Every element
// is reduced in rank order by exactly one code path, so all ranks hold the same bits.
// allreduce_pieces (the worker's fused allreduce) does the same straight from and into the
// callers' tensors, with Average's division and the scale factors fused into its copies, and
// pipelines the chunks with one barrier each (three rotating buffer sets).
// Synchronisation: one monotonic counter per rank (a futex word); a rank spins briefly, then
// sleeps in the kernel. Every wait is bounded by the op timeout, and abort() (from any thread or
// any rank of the host) marks every counter and wakes every sleeper.
//
// Ranks here are positions in the host's group (its ranks' global ranks in ascending order), so
// on a single host they equal the global ranks.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker_lib/backend.h"
#include "worker_lib/kv_store.h"
#include "worker_lib/backends/shm/round_board.h"

namespace hvrun::detail {

struct ShmBackendOptions {
  int rank = 0;                   // position in the host's group
  int size = 1;                   // ranks in the host's group
  std::string job_id;             // names the segment (two jobs never share one)
  std::string host;               // the group's host, as the launcher named it
  size_t chunk_bytes = 1 << 20;   // one slot: the unit of pipelining (keep it cache-sized)
  std::string kv_prefix = "shm";  // key-value store namespace (one per host group)
  std::chrono::milliseconds connect_timeout{30000};  // every local rank mapped the segment
  std::chrono::milliseconds timeout{300000};         // every collective
};

// The backend and its segment's round agreement (round_board.h; null for a group of one), which
// lives as long as the backend.
struct ShmDataPlane {
  std::unique_ptr<Backend> backend;
  shm::RoundBoard* board = nullptr;  // the segment's round board; null for a group of one
};

// Creates or maps the host's segment (blocks until every rank of the group did, bounded).
// A group of one rank needs no segment.
Result<ShmDataPlane> make_shm_data_plane(const ShmBackendOptions& options, KeyValueStore& store);
// The backend alone.
Result<std::unique_ptr<Backend>> make_shm_backend(const ShmBackendOptions& options,
                                                  KeyValueStore& store);

}  // namespace hvrun::detail
