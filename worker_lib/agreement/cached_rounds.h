// Cached rounds: the steady state of asynchronous submissions without the coordinator. When
// everything a rank has submitted is an allreduce (of a CPU or a CUDA tensor) the coordinator
// already negotiated (cached, metadata and device unchanged), the thread that would send the
// RequestBatch holds the ops instead and posts their cache ids as a bit vector to the job's
// round agreement (worker_lib/round_agreement.h: the shm segment's round board). The AND of
// every rank's bits is the set ready everywhere; every rank builds the same responses from it
// (cache id order, the coordinator's fusion rule and threshold: proto/fusion_packing.h) and
// executes them as it executes a plan, so the results are the coordinator path's bits. A CUDA
// tensor's response says so, and the plan executor gives it to the GPU executor
// (backends/nccl/gpu_executor.h), which calls the device plane on whichever thread holds the
// executor's lock here. What is not agreed goes to the coordinator exactly as before. Why no op
// is lost, duplicated or run apart, step by step:
//  - Only when this rank waits for nothing else: no op sent to the coordinator without its
//    plan, every received plan executed, no abort, shutdown or timeline recording, checked
//    under the executor's lock (held through the round and the execution). As for the
//    blocking fast path (fast_path.h), ranks in that state have counted the same events
//    (execution_lane.h) and meet in the same round; a plan arriving meanwhile runs after.
//  - The round agrees only if every rank arrived with the same key (this kind of round, the
//    event count, the bit vector's size, the fusion threshold, the world size). A blocking
//    fast call on a peer has another key: the round disagrees and both take the coordinator.
//  - Every rank reads every rank's bits and computes the same AND, so every rank runs the same
//    responses in the same order, between the same two plans. An op runs here only if its bit
//    was set on every rank, and a rank sets bits only for ops it has not sent.
//  - Ops held but not in the AND stay held for the next round (the same rules). A round that
//    fails (a rank late past the wait, a rank that sent something and refused it, a departed
//    rank), disagrees, or agrees on nothing, sends every held op to the coordinator, before
//    anything submitted after them (held ops go first; no one else sends while ops are held).
//    A rank that sends refuses its current round, so a peer still holding the same ops fails
//    its round at once and sends them too: the coordinator gets every rank's submission, and
//    negotiates, errs, joins and stalls as it always did.
//  - A joined rank, or one with a join or any other op in flight, never holds: its peers' rounds
//    fail and everything goes through the coordinator, which knows the joined ranks.
// Costs: one round (a shm barrier's worth of cache lines plus the bit vector) per batch, then
// the backend's allreduce, instead of a coordinator round trip.
//
// Threads: dispatch() on the background thread; send_pending() from a thread about to wait (it
// waits for a plan that still runs when what it would send could take a round).
// Both take the executor's lock (the runtime's lock order), which guards `held_`. What they
// need of the runtime (its state at one instant, its outbox and request cache) comes through
// RankState (rank_state.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "worker_lib/agreement/execution_lane.h"
#include "worker_lib/agreement/fast_path.h"
#include "worker_lib/agreement/rank_state.h"
#include "worker_lib/round_agreement.h"
#include "worker_lib/execution/pending_op.h"
#include "worker_lib/execution/plan_executor.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

class CachedRounds {
 public:
  // Cache ids a round's bit vector covers (ids above it go through the coordinator).
  static constexpr uint32_t kMaxCacheId = 4095;

  struct Context {
    RankState& rank;  // what this rank's runtime holds, and its outbox
    ExecutionLane& lane;
    PlanExecutor& executor;
    telemetry::WorkerTelemetry& telemetry;
    const FastPath& fast_path;  // whether rounds are on, and the wait
    int world_size = 1;
    int64_t fusion_threshold_bytes = 0;  // the coordinator's (registration)
  };
  // `rounds`: the job's round agreement, or null (then every submission is sent).
  CachedRounds(Context context, RoundAgreement* rounds);

  // The background thread, when the outbox holds something: runs it through agreed rounds
  // when every rank may, else sends it (and what is held) to the coordinator.
  void dispatch();
  // A thread about to block on a handle: dispatch() here when the executor's lock is free (no
  // thread hop) or, once it is, when every unsent op could take a round; else sends the outbox
  // as RankState::send_pending does.
  void send_pending();
  // Whether submissions may run through agreed rounds at all (a multi-rank job with a round
  // board and the fast path on).
  bool enabled() const { return enabled_; }

 private:
  using Held = HeldOp;
  void dispatch_locked();  // the executor's lock held, as below
  // One round over `held_`: true when it agreed on some ops and ran them.
  bool run_round();
  // Runs the agreed ops (ascending cache id) as responses fused as the coordinator fuses them.
  void execute(std::vector<Held> agreed);

  Context c_;
  RoundAgreement* rounds_ = nullptr;
  bool enabled_ = false;
  std::vector<Held> held_;  // in submission order
  // execute()'s responses and their entries, kept from round to round: a step's rounds have
  // the same tensors, so clearing them keeps every ResponseTensor and vector for the next.
  std::vector<v1::Response> responses_;
  std::vector<ResponseEntries> entries_;
  // Set while a thread is inside dispatch_locked(): a thread about to wait leaves the outbox
  // to it instead of sending what it would hold.
  std::atomic<bool> dispatching_{false};
};

}  // namespace hvrun::detail
