// The fast path: a blocking allreduce of a tensor the coordinator already negotiated (cached,
// metadata unchanged) on a single-host shared-memory job runs on the caller's thread when every
// rank is idle and calls the same one. The ranks agree through the segment's round board
// (backends/shm/round_board.h) and reduce there, with no message to the coordinator. Why it is
// safe, step by step:
//  - Only when this rank is idle: nothing in flight or unsent, every received plan executed,
//    checked under the executor's lock (held until the collective ran). Idle ranks have
//    executed the same plans, because every plan holds an op of every rank; so their event
//    counts (execution_lane.h) agree and they meet in the same round.
//  - The round runs only if every rank arrived with the same key (tensor's cache id, metadata
//    hash, event count, size): the same collective, between the same two plans, on every rank.
//    A plan arriving meanwhile waits for the executor's lock, so it runs after the fast
//    collective on every rank alike.
//  - Otherwise every rank sees the same failed or disagreeing round and submits the call to the
//    coordinator, which handles it as before (errors, joins, stalls). A rank that submits
//    anything refuses its current round, so peers waiting in it fall back at once.
// Small tensors (up to RoundBoard::kPayloadBytes in their work type) travel inside the round:
// one synchronisation in all, reduced with the shm backend's kernels in the same order as its
// latency path, so the bits equal the coordinator path's. Larger ones run through the executor
// (the shm backend's allreduce) once agreed.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"
#include "worker_lib/backends/shm/round_board.h"
#include "worker_lib/runtime/execution_lane.h"
#include "worker_lib/runtime/plan_executor.h"
#include "worker_lib/runtime/submitter.h"
#include "worker_lib/runtime/work_state.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

// A blocking allreduce the fast path may run: CPU tensors of `dtype` and `shape`, already
// checked by the caller.
struct FastAllreduce {
  const std::string& name;
  const void* input;
  void* output;
  DataType dtype;
  const std::vector<int64_t>& shape;
  const AllreduceOptions& options;
};

class FastPath {
 public:
  struct Context {
    WorkState& state;
    ExecutionLane& lane;
    const Submitter& submitter;  // its request cache
    PlanExecutor& executor;
    telemetry::WorkerTelemetry& telemetry;
    int world_size = 1;
    std::chrono::milliseconds op_timeout{300000};
  };
  // `board`: the job's round board, or null (then the fast path is off).
  FastPath(Context context, shm::RoundBoard* board);

  // Runs `call` when every rank agrees and returns its status; nullopt when it did not run
  // (submit it as usual). Any thread.
  std::optional<Status> try_allreduce(const FastAllreduce& call);

 private:
  // The executor's lock held: the cache entry of `call` when it may run fast (null otherwise).
  const CacheEntry* entry_for(const FastAllreduce& call) const;
  bool idle();

  Context c_;
  shm::RoundBoard* board_ = nullptr;
  bool enabled_ = false;  // board_ and --fast-path
  std::chrono::nanoseconds wait_{std::chrono::milliseconds(50)};
  std::vector<const void*> sources_;  // the executor's lock: the round's payloads
};

}  // namespace hvrun::detail
