// The parts one init() is made of, each owning its own state (what they must share is
// WorkState, work_state.h). RuntimeBuilder (runtime_builder.h) fills them in; RuntimeLifecycle
// (lifecycle.h) starts, aborts and stops them; Runtime (runtime.h) is what the API calls.
//
// Declared in the order they are built: destroyed in reverse, so a part outlives every part
// built after it (the threads' owners go first, the stream and the client they use last).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"
#include "worker_lib/runtime/death_watch_holder.h"
#include "worker_lib/agreement/cached_rounds.h"
#include "worker_lib/agreement/execution_lane.h"
#include "worker_lib/agreement/fast_path.h"
#include "worker_lib/autopsy/flight_recorder.h"
#include "worker_lib/autopsy/responder.h"
#include "worker_lib/backend.h"
#include "worker_lib/backends/nccl/gpu_executor.h"
#include "worker_lib/execution/plan_executor.h"
#include "worker_lib/runtime/call_counters.h"
#include "worker_lib/runtime/coordinator_client.h"
#include "worker_lib/runtime/heartbeat.h"
#include "worker_lib/runtime/live_workers.h"
#include "worker_lib/runtime/plan_runner.h"
#include "worker_lib/runtime/private_coordinator.h"
#include "worker_lib/runtime/process_set_planes.h"
#include "worker_lib/runtime/runtime_rank_state.h"
#include "worker_lib/runtime/stream_reader.h"
#include "worker_lib/runtime/submitter.h"
#include "worker_lib/runtime/work_state.h"
#include "worker_lib/telemetry/report_sender.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

struct RuntimeParts {
  explicit RuntimeParts(Config given) : config(std::move(given)) {}
  RuntimeParts(const RuntimeParts&) = delete;
  RuntimeParts& operator=(const RuntimeParts&) = delete;

  Config config;
  // A single process's own coordinator (Config::private_coordinator); first, so it outlives
  // every part that talks to it.
  std::unique_ptr<PrivateCoordinator> private_coordinator;
  std::unique_ptr<LiveWorkerClaim> claim;  // from start() to the end of shutdown()
  // The launcher's death watch held from start() to the end of a clean shutdown() (null: none).
  std::unique_ptr<DeathWatchHolder> death_watch;
  // Registration's answer.
  Topology topology;
  std::string job_id;
  std::vector<std::string> rank_hosts;  // every rank's host, by rank (empty: not said)
  std::unique_ptr<CoordinatorClient> client;
  // The data planes: the job's CPU backend, the global set's executor (and its GPU executor),
  // the other process sets'.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<NegotiationStream> stream;
  std::unique_ptr<PlanExecutor> executor;
  GpuExecutor* gpu = nullptr;  // executor's GPU executor
  std::unique_ptr<ProcessSetPlanes> process_sets;
  // Telemetry: counters and timeline events, and the thread that reports them on `stream`
  // (declared after both, so it stops first).
  std::unique_ptr<telemetry::WorkerTelemetry> telemetry;
  std::unique_ptr<telemetry::ReportSender> reporter;
  // This rank's latest collectives (null when --flight-recorder-size is 0), and the thread
  // that answers autopsies (stopped before Goodbye).
  std::unique_ptr<FlightRecorder> recorder;
  std::unique_ptr<AutopsyResponder> autopsy;

  // Negotiation: the shared work state, the executor's lane, and the parts around them.
  WorkState state;
  ExecutionLane lane;
  CallCounters counters;
  std::unique_ptr<Submitter> submitter;
  std::unique_ptr<RuntimeRankState> rank_state;  // the parts as the fast path sees them
  std::unique_ptr<FastPath> fast_path;
  std::unique_ptr<CachedRounds> cached_rounds;
  std::unique_ptr<PlanRunner> plan_runner;
  std::unique_ptr<Heartbeat> heartbeat;
  std::unique_ptr<StreamReader> reader;
};

}  // namespace hvrun::detail
