// The negotiation engine: decides, from every rank's requests, which tensors run, in what order
// and fused how. Pure: no I/O, no threads, no clock of its own (callers pass `now`), so the same
// inputs always give the same plans and tests drive it with simulated ranks.
//
// Threads: not thread-safe; one owner thread calls everything (the service's negotiation loop).
//
// The protocol, step by step (the worker side is in proto/hvrun.proto and in
// docs/ARCHITECTURE.md, "Life of an allreduce"):
//  1. A rank submits a RequestBatch: full TensorRequests (cache_id 0: name, op, dtype, shape, ...)
//     and/or cache ids (TensorRequest{cache_id} or RequestBatch.cached_ids) for tensors whose
//     metadata is unchanged since the coordinator assigned the id. A cache id stands for exactly
//     the metadata the tensor had when the id was (last) sent back in a plan.
//  2. The engine marks (tensor, rank). The first submission of a name fixes the reference
//     metadata; later ranks' submissions are compared with it (allgather and alltoall may differ
//     in the first dimension). A rank submitting a name it already has in flight gets an error
//     response of its own (Response.error_ranks = {rank}); its first submission stays in flight.
//  3. A tensor is ready when every rank that has not joined submitted it. A ready tensor whose
//     ranks disagreed becomes an error response naming each rank and what it sent; a tensor that
//     can never complete (a rank left cleanly without it, a broadcast root that joined) becomes an
//     error response too. Errors never wait.
//  4. Fusion: ready allreduces with equal dtype, device, reduce op, prescale and postscale (and
//     ready allgathers with equal dtype and device) are packed, in order of first submission, into
//     responses of at most fusion_threshold_bytes (a larger tensor goes alone; 0 = no fusion).
//     Other ops get one response per tensor; a grouped allreduce (group_id) waits for all of its
//     group_size members and runs as one response.
//  5. Cycle: ready fusable tensors wait for company at most cycle_time after they became ready,
//     and not at all when no pending (partly submitted) tensor could join their response, or when
//     they already fill a buffer. So a lone 4-byte allreduce is answered at once.
//  6. take_plan(now) returns the responses due at `now` as the next Plan (seq 1, 2, 3, ...); the
//     caller sends that same Plan to every rank. next_deadline() says when to call it again if
//     nothing new arrives.
//  7. Cache: a successful response assigns each cacheable tensor (allreduce, allgather, broadcast,
//     reducescatter) an id 1, 2, 3, ... in plan order, or keeps its id, updating the remembered
//     metadata when ranks re-sent it in full. Ids are never evicted or reused; at capacity new
//     tensors get id 0 and keep negotiating in full.
//  8. Join: a JOIN request ("join") marks its rank joined; tensors become ready without joined
//     ranks, whose responses list them in joined_ranks (they contribute neutral data: zeros for
//     Sum/Average, the identity for Min/Max/Product; zero rows for allgather and alltoall) and
//     count contributing_ranks without them (or all ranks with join_average_all). Every op
//     keeps working; a broadcast whose root joined fails on every rank. When every rank has joined, a JOIN response with
//     last_joined_rank follows, and the join state resets for the next round.
//  9. rank_departed(r): rank r left cleanly (Goodbye); every tensor still waiting for r fails,
//     as does every tensor submitted later that r would have to take part in. Each such
//     failure is also kept for take_departure_failures(): the rank that left is the cause of
//     the others' failed collective, and the service says so.
// 10. Stalls: stalled_tensors() lists tensors some ranks submitted long ago and the ranks still
//     missing, for warnings and the stall shutdown (the service decides what to do).
// 11. One name, two ops: the Python bindings submit "<op>.<name>" (proto/collective_op_name.h),
//     so rank 0's allreduce 'm' and rank 1's allgather 'm' are two tensors that each wait for
//     the other rank forever; a name the C API submits as two ops is one tensor and fails at
//     step 3. fail_op_mismatches(now) declares such a pair (or more) a mismatch when, for
//     op_mismatch_grace: the tensors share the user's name (the op prefix taken off; not a
//     name the bindings generated for an unnamed call) and are not all one op, no rank submitted more than one of them (a rank with both in flight is
//     an asynchronous pattern its peers may still follow), every rank that submitted one has
//     nothing else in flight (it waits on it alone), and none of those ranks submitted anything
//     since. Ranks that submit two asynchronous ops in different orders pass through such a
//     moment and leave it at their next submission, well within the grace. The tensors fail
//     on every rank with one message naming each rank and its op.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator {

struct EngineOptions {
  int world_size = 0;
  int64_t fusion_threshold_bytes = 128LL << 20;  // 0 = no fusion
  std::chrono::microseconds cycle_time{1000};
  int cache_capacity = 1024;                     // 0 = no cache
  // Average while ranks have joined: false divides by the contributing ranks (default), true
  // by every rank (Horovod's behaviour): Response.contributing_ranks says which.
  bool join_average_all = false;
  // The job's rank of each of this engine's ranks, for messages only: a process set's engine
  // negotiates among its members as ranks 0..k-1 (their order in the set). Empty = the same.
  std::vector<int> rank_names;
  uint32_t process_set_id = 0;  // the set this engine negotiates, named in its stall reports
  // How long one name submitted as different ops by disjoint, idle ranks waits before it is
  // declared a mismatch (step 11); 0 = never (the stall inspector still reports it).
  std::chrono::microseconds op_mismatch_grace{0};
};

// A tensor that has waited long for some ranks.
struct StalledTensor {
  std::string name;
  v1::CollectiveOp op = v1::COLLECTIVE_OP_UNSPECIFIED;
  std::chrono::steady_clock::duration waited{};
  std::vector<int> missing_ranks;    // neither submitted it nor joined (the job's ranks)
  std::vector<int> submitted_ranks;
  uint32_t process_set_id = 0;       // 0 = the global set
};

// A collective that failed because a rank left cleanly without taking part (step 9).
struct DepartureFailure {
  int rank = -1;          // the rank that left (the job's rank)
  std::string message;    // the error every rank got: names the tensor and who submitted it
};

// "allreduce 'grad.w' has waited 62 s for rank 3, 5 (submitted by ranks 0-2, 4, 6-7)"
std::string describe_stall(const StalledTensor& stall);

// One report for several stalled tensors, grouped by missing rank: "stall: rank 1 <detail(1)>
// has not submitted allreduce 'a' (waited 2.1 s; submitted by ranks 0, 2), ...". `detail`
// adds what the caller knows of a rank (host, pid, last completed operation).
std::string describe_stalls(const std::vector<StalledTensor>& stalls,
                            const std::function<std::string(int rank)>& detail);

class NegotiationEngine {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  explicit NegotiationEngine(EngineOptions options);
  ~NegotiationEngine();
  NegotiationEngine(const NegotiationEngine&) = delete;
  NegotiationEngine& operator=(const NegotiationEngine&) = delete;

  // Takes one rank's batch. Mistakes in tensors (mismatch, duplicate) become error responses;
  // an error Status means the rank broke the protocol (unknown cache id, missing name or op,
  // rank out of range) and the job cannot continue safely.
  Status submit(int rank, const v1::RequestBatch& batch, TimePoint now);

  // Rank `rank` left cleanly; tensors that still wait for it fail (see step 9).
  void rank_departed(int rank, TimePoint now);
  // The collectives that failed because a rank left (step 9) since the last call, in order.
  std::vector<DepartureFailure> take_departure_failures();

  // The responses due at `now`, as the next plan; nullopt when none are due.
  std::optional<v1::Plan> take_plan(TimePoint now);

  // When take_plan() has something due even without new submissions; nullopt = nothing waits.
  std::optional<TimePoint> next_deadline() const;

  // Step 11: fails every name used with different ops as that step says, and returns one
  // message per such name (ranks as the job numbers them); empty when there is none.
  std::vector<std::string> fail_op_mismatches(TimePoint now);

  // Tensors not yet ready whose first submission is at least `older_than` before `now`, oldest
  // first.
  std::vector<StalledTensor> stalled_tensors(TimePoint now, Clock::duration older_than) const;

  // Tensors submitted by at least one rank and not yet sent in a plan (for stall reports).
  size_t in_flight_count() const;
  // Cache ids assigned so far.
  size_t cache_size() const;

  struct State;  // engine/engine_state.h

 private:
  std::unique_ptr<State> state_;
};

}  // namespace hvrun::coordinator
