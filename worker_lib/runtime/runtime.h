// The worker runtime: one object per init(), composed of parts with one job each, all built in
// connect() from the job's state and started there:
//   registration.h     Register, read the topology and the coordinator's settings.
//   work_state.h       what the threads share: ops in flight, outbox, inbox, terminal status.
//   submitter.h        submissions, the outbox and its RequestBatches, the request cache.
//   stream_reader.h    the reader thread: coordinator messages in, JobAbort, a lost stream.
//   heartbeat.h        the heartbeat thread.
//   plan_runner.h      the background thread: sends, executes plans (execution/plan_executor.h).
//   execution_lane.h   the executor's lock and the fast path's round counter.
//   fast_path.h        blocking allreduces agreed among the ranks (round_agreement.h), on the
//                      caller's thread.
//   cached_rounds.h    async submissions of cached allreduces agreed among the ranks the same
//                      way, instead of a RequestBatch.
//   process_set_planes.h  the process sets this rank knows, and its sets' own data planes.
//   autopsy/          the flight recorder (this rank's latest collectives) and the answer to
//                      an autopsy request (ring, what it waits in, every thread's stacks).
//   private_coordinator.h  without a launcher, the hvrun-coordinator child of a job of size 1
//                      (started in start(), before connect(); reaped at the end of shutdown()).
//
// Negotiation, step by step (the protocol contract lives in proto/hvrun.proto):
//  1. init: Register (blocks until every rank registered), connect the backend through the
//     coordinator's key-value store, open the Negotiate stream and send Hello.
//  2. API threads call submit(): the op enters the in-flight table (by name) and the outbox.
//  3. The background thread (woken by submit) sends the outbox as one RequestBatch; a thread
//     that then blocks on a handle sends it itself if the background thread has not yet
//     (send_pending). Full metadata the first time, only the cache id afterwards.
//  4. The reader thread hands messages to the background thread; a JobAbort or a lost stream
//     tears the data plane down at once (stream_reader.h). The heartbeat thread tells the
//     coordinator this rank is alive even while a collective runs.
//  5. The background thread executes every Plan's responses in order and completes handles;
//     JobAbort fails everything with kAborted; a lost stream with kUnavailable.
//  6. shutdown: fail what is pending with kCancelled, send Goodbye, close the stream (bounded).
//  7. The fast path (fast_path.h) runs some blocking allreduces without the coordinator, and
//     the cached rounds (cached_rounds.h) async ones: step 3 becomes a round among the ranks.
//
// Threads: submit/abort/shutdown/send_pending/try_fast_allreduce from any thread; the loop,
// reader, heartbeat and telemetry threads as above.
//
// Lock order (the only place it is written; take them in this order, never the reverse):
//   1. ExecutionLane::mutex   the executor's lock: a plan, or a fast collective
//   2. Submitter's send lock  one RequestBatch writer at a time; guards the request cache
//   3. WorkState::mutex       the shared work state
// Leaves, held with nothing else taken inside (some under WorkState::mutex): Heartbeat's lock,
// NegotiationStream's write lock, a HandleState's mutex, the GPU executor's lock,
// WorkerTelemetry's mutex, ReportSender's lock.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hvrun/hvrun.h"
#include "worker_lib/autopsy/flight_recorder.h"
#include "worker_lib/autopsy/responder.h"
#include "worker_lib/backend.h"
#include "worker_lib/backends/nccl/gpu_executor.h"
#include "worker_lib/execution/plan_executor.h"
#include "worker_lib/runtime/cached_rounds.h"
#include "worker_lib/runtime/coordinator_client.h"
#include "worker_lib/runtime/execution_lane.h"
#include "worker_lib/runtime/fast_path.h"
#include "worker_lib/runtime/heartbeat.h"
#include "worker_lib/runtime/live_workers.h"
#include "worker_lib/execution/pending_op.h"
#include "worker_lib/runtime/plan_runner.h"
#include "worker_lib/runtime/process_set_planes.h"
#include "worker_lib/runtime/private_coordinator.h"
#include "worker_lib/runtime/stream_reader.h"
#include "worker_lib/runtime/submitter.h"
#include "worker_lib/runtime/work_state.h"
#include "worker_lib/telemetry/report_sender.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

class Runtime {
 public:
  using FastAllreduce = detail::FastAllreduce;

  static Result<std::unique_ptr<Runtime>> start(const Config& config);
  ~Runtime();

  // Takes ownership of `op`; returns its handle (already failed when the runtime is not
  // running or the name is in flight).
  Handle submit(std::shared_ptr<PendingOp> op) {
    count_waits_of(*op);
    return submitter_->submit(std::move(op));
  }
  // submit() of the op `fill` describes, of the global set, reusing the last op of its name
  // when nothing else holds it (Submitter::submit_reusing).
  template <typename Fill>
  Handle submit_reusing(const std::string& name, Fill&& fill) {
    return submitter_->submit_reusing(name, [&](PendingOp& op) {
      fill(op);
      count_waits_of(op);
    });
  }
  // All or nothing: every op is queued (in one batch), or every handle fails.
  std::vector<Handle> submit_group(std::vector<std::shared_ptr<PendingOp>> ops) {
    for (const auto& op : ops) count_waits_of(*op);
    return submitter_->submit_group(std::move(ops));
  }
  // `failure`: this rank leaves because of an error of its own; it is reported to the
  // coordinator (which aborts the job naming this rank) instead of Goodbye (Worker::
  // shutdown_with_failure).
  Status shutdown(const std::optional<std::string>& failure = std::nullopt);
  void abort(const std::string& reason);
  // The calling thread is about to block on a handle, so it writes what the outbox still
  // holds itself instead of waiting for the background thread to wake up and do it (a thread
  // hop of tens of us on a busy host). Async submissions keep waking the background thread,
  // which batches a burst into one write. Any thread.
  // Its time counts as blocked (blocked_time.h): it may run a round that waits for the peers.
  void send_pending() {
    const auto start = BlockedTime::Clock::now();
    cached_rounds_->send_pending();
    telemetry_->blocked_time().add(start, BlockedTime::Clock::now());
  }
  // Runs `call` when every rank agrees and returns its status; nullopt when it did not run
  // (submit it as usual). Any thread.
  std::optional<Status> try_fast_allreduce(const FastAllreduce& call) {
    return fast_path_->try_allreduce(call);
  }

  // Any thread: a process set's members (id 0: every rank); nullopt when it does not exist.
  std::optional<ProcessSetMembers> process_set(uint32_t id) const {
    return process_sets_->members(id);
  }
  std::vector<uint32_t> process_set_ids() const { return process_sets_->ids(); }
  void set_process_set_removing(uint32_t id, bool removing) {
    process_sets_->set_removing(id, removing);
  }
  uint64_t next_process_set_call() {
    std::lock_guard<std::mutex> lock(state_.mutex);
    return ++state_.process_set_calls;
  }
  // Any thread: the process set an op of this rank runs on, checked: `op_text` names the call.
  Result<ProcessSetMembers> process_set_of_mine(const ProcessSet& set,
                                               const std::string& op_text) const;

  const Topology& topology() const { return topology_; }
  // Elastic jobs: the coordinator said slots were added since this init (Worker::hosts_updated).
  bool hosts_updated() {
    std::lock_guard<std::mutex> lock(state_.mutex);
    return state_.hosts_updated;
  }
  const std::string& job_id() const { return job_id_; }
  const Config& config() const { return config_; }
  // Any thread: allocator for library-allocated CUDA outputs (see hvrun::DeviceAllocator).
  void set_device_allocator(DeviceAllocator allocator) {
    gpu_->set_device_allocator(allocator);
    process_sets_->set_device_allocator(std::move(allocator));
  }
  // Telemetry (worker_lib/telemetry/): the trainer's steps and their named phases, and the
  // job's timeline started / stopped at run time (the coordinator writes the file). Any thread.
  void mark_step() { telemetry_->mark_step(); }
  void mark_phase(std::string_view name) { telemetry_->mark_phase(name); }
  Status start_timeline(const std::string& path);
  Status stop_timeline();
  // Per-process counters of each process set, the same on its ranks by the callers' contract.
  uint64_t next_barrier_id(uint32_t process_set);
  uint64_t next_group_id(uint32_t process_set);

 private:
  explicit Runtime(const Config& config);
  Status connect();
  // Tears this rank's data planes down (CPU backend and GPU executor): any thread.
  void tear_down(const std::string& reason);
  void start_telemetry();  // after the stream is open (connect)
  Status send_timeline_control(const std::string& filename);
  // shutdown(failure): sends the failure as an AbortRequest; false when the job had already
  // failed or the coordinator could not be told.
  bool report_failure(const std::string& reason);
  // shutdown(): when a plan went unexecuted (its ops were cancelled), tears the data plane down
  // so peers blocked in that collective fail at once instead of at their op timeout.
  void release_peers_of_skipped_plans();
  // A wait on `op`'s handle that blocks counts as this rank's blocked time.
  void count_waits_of(PendingOp& op) const {
    if (op.handle) op.handle->blocked = telemetry_->blocked();
  }

  Config config_;
  // A single process's own coordinator (Config::private_coordinator); first, so it outlives
  // every part that talks to it.
  std::unique_ptr<PrivateCoordinator> private_coordinator_;
  std::unique_ptr<LiveWorkerClaim> claim_;  // from start() to the end of shutdown()
  Topology topology_;
  std::string job_id_;
  std::unique_ptr<CoordinatorClient> client_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<NegotiationStream> stream_;
  std::unique_ptr<PlanExecutor> executor_;
  GpuExecutor* gpu_ = nullptr;  // executor_'s GPU executor
  std::unique_ptr<ProcessSetPlanes> process_sets_;  // the other sets' data planes
  // Telemetry: counters and timeline events, and the thread that reports them on stream_
  // (declared after both, so it stops first).
  std::unique_ptr<telemetry::WorkerTelemetry> telemetry_;
  std::unique_ptr<telemetry::ReportSender> reporter_;
  // This rank's latest collectives (null when --flight-recorder-size is 0), and the thread
  // that answers autopsies (stopped before Goodbye).
  std::unique_ptr<FlightRecorder> recorder_;
  std::unique_ptr<AutopsyResponder> autopsy_;

  WorkState state_;
  ExecutionLane lane_{state_};
  std::unique_ptr<Submitter> submitter_;
  std::unique_ptr<FastPath> fast_path_;
  std::unique_ptr<CachedRounds> cached_rounds_;
  std::unique_ptr<PlanRunner> plan_runner_;
  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<StreamReader> reader_;
};

}  // namespace hvrun::detail
