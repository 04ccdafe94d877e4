// The fast path: a blocking allreduce of a tensor the coordinator already negotiated (cached,
// metadata unchanged) runs on the caller's thread when every rank is idle and calls the same
// one. The ranks agree through the job's round agreement (worker_lib/round_agreement.h: the shm
// segment's round board on one host; a board per host joined by the round arbiter across
// hosts), with no message to the coordinator. Why it is safe, step by step:
//  - Only when this rank is idle: nothing in flight or unsent, every received plan executed,
//    checked under the executor's lock (held until the collective ran). Idle ranks have
//    executed the same plans of the global set, because each of its plans holds an op of every
//    rank; so their event counts (execution_lane.h) agree and they meet in the same round. A
//    plan of another process set (every rank receives and counts it, members or not) may reach
//    an idle non-member later than a member: their counts differ for a while, the rank that
//    moved past the round refused it (plan_runner.cc), and the call falls back to the
//    coordinator. So set traffic lowers the fast path's hit rate, never its correctness.
//  - The round runs only if every rank arrived with the same key (tensor's cache id, metadata
//    hash, event count, size): the same collective, between the same two plans, on every rank.
//    A plan arriving meanwhile waits for the executor's lock, so it runs after the fast
//    collective on every rank alike.
//  - Otherwise every rank sees the same failed or disagreeing round and submits the call to the
//    coordinator, which handles it as before (errors, joins, stalls). A rank that submits
//    anything refuses its current round, so peers waiting in it fall back at once.
// On one host, small tensors (up to the agreement's payload capacity in their work type) travel
// inside the round: one synchronisation in all, reduced by the agreement
// (RoundPayloads::reduce_payloads) to the same bits as the coordinator path's. Larger ones, and
// every call across hosts (only the agreement crosses hosts), run through the CPU executor
// (CpuExecutor::fast_allreduce: the data plane's allreduce) once agreed. Telemetry counts both
// as the fast path's (PhaseObserver::on_fast_collective).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"
#include "worker_lib/agreement/execution_lane.h"
#include "worker_lib/agreement/rank_state.h"
#include "worker_lib/round_agreement.h"
#include "worker_lib/autopsy/flight_recorder.h"
#include "worker_lib/execution/cpu_executor.h"
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

// How long a rank waits for the others in a round: --fast-path-wait-ms, at most a quarter of
// the op timeout (a rank waiting in a round holds up its own plans meanwhile, so peers in a
// collective with it wait too). The cross-host rounds' arbiter waits as long.
std::chrono::nanoseconds round_wait(const FastPathConfig& settings,
                                    std::chrono::milliseconds op_timeout);

class FastPath {
 public:
  struct Context {
    RankState& rank;  // what this rank's runtime holds, and its request cache
    ExecutionLane& lane;
    CpuExecutor& executor;
    telemetry::WorkerTelemetry& telemetry;
    int world_size = 1;
    std::chrono::milliseconds op_timeout{300000};
    FastPathConfig settings;
    FlightRecorder* recorder = nullptr;  // null: nothing recorded
  };
  // `rounds`: the job's round agreement, or null (then the fast path is off).
  FastPath(Context context, RoundAgreement* rounds);

  // Runs `call` when every rank agrees and returns its status; nullopt when it did not run
  // (submit it as usual). Any thread.
  std::optional<Status> try_allreduce(const FastAllreduce& call);

  // Whether ranks may agree without the coordinator at all (blocking allreduces here, the
  // cached rounds of async submissions), and how long one waits for the others in a round.
  bool rounds_on() const { return rounds_on_; }
  std::chrono::nanoseconds wait() const { return wait_; }

 private:
  // The executor's lock held: the cache entry of `call` when it may run fast (null otherwise).
  const CacheEntry* entry_for(const FastAllreduce& call) const;

  Context c_;
  RoundAgreement* rounds_ = nullptr;
  RoundPayloads* payloads_ = nullptr;  // rounds_'s, where it carries them (a single host)
  bool rounds_on_ = false;  // rounds_ and --fast-path
  std::chrono::nanoseconds wait_{std::chrono::milliseconds(50)};
};

}  // namespace hvrun::detail
