// The worker runtime: one object per init(), composed of parts with one job each, each owning
// its state (runtime_parts.h lists them; RuntimeBuilder assembles them, runtime_builder.h;
// RuntimeLifecycle starts, aborts and stops them, lifecycle.h):
//   registration.h     Register, read the topology and the coordinator's settings.
//   work_state.h       the one state the parts share under one lock: the background thread's
//                      inbox and the ops in flight (it writes the runtime's lock order down).
//   submitter.h        submissions, the outbox and its RequestBatches, the request cache.
//   stream_reader.h    the reader thread: coordinator messages in, JobAbort, a lost stream.
//   heartbeat.h        the heartbeat thread.
//   plan_runner.h      the background thread: sends, executes plans (execution/plan_executor.h).
//   runtime_rank_state.h  the parts above as the steady state sees them (agreement/rank_state.h).
//   agreement/         the steady state: execution_lane.h (the executor's lock and the rounds'
//                      counter); fast_path.h (blocking allreduces agreed among the ranks, on
//                      the caller's thread); cached_rounds.h (async submissions of cached
//                      allreduces agreed the same way, instead of a RequestBatch).
//   process_set_planes.h  the process sets this rank knows, and its sets' own data planes.
//   call_counters.h    the ids of barriers, groups and process-set calls.
//   autopsy/          the flight recorder (this rank's latest collectives) and the answer to
//                      an autopsy request (ring, what it waits in, every thread's stacks).
//   private_coordinator.h  without a launcher, the hvrun-coordinator child of a job of size 1
//                      (started in start(), before the build; reaped at the end of shutdown()).
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
//  7. The fast path (agreement/fast_path.h) runs some blocking allreduces without the
//     coordinator, and the cached rounds (agreement/cached_rounds.h) async ones: step 3 becomes
//     a round among the ranks.
//
// Threads: submit/abort/shutdown/send_pending/try_fast_allreduce from any thread; the loop,
// reader, heartbeat and telemetry threads as above.
//
// Lock order: written down once, in work_state.h.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hvrun/hvrun.h"
#include "worker_lib/execution/pending_op.h"
#include "worker_lib/runtime/lifecycle.h"
#include "worker_lib/runtime/runtime_parts.h"

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
    return parts_.submitter->submit(std::move(op));
  }
  // submit() of the op `fill` describes, of the global set, reusing the last op of its name
  // when nothing else holds it (Submitter::submit_reusing).
  template <typename Fill>
  Handle submit_reusing(const std::string& name, Fill&& fill) {
    return parts_.submitter->submit_reusing(name, [&](PendingOp& op) {
      fill(op);
      count_waits_of(op);
    });
  }
  // All or nothing: every op is queued (in one batch), or every handle fails.
  std::vector<Handle> submit_group(std::vector<std::shared_ptr<PendingOp>> ops) {
    for (const auto& op : ops) count_waits_of(*op);
    return parts_.submitter->submit_group(std::move(ops));
  }
  // `failure`: this rank leaves because of an error of its own; it is reported to the
  // coordinator (which aborts the job naming this rank) instead of Goodbye (Worker::
  // shutdown_with_failure).
  Status shutdown(const std::optional<std::string>& failure = std::nullopt) {
    return lifecycle_.shutdown(failure);
  }
  void abort(const std::string& reason) { lifecycle_.abort(reason); }
  // The calling thread is about to block on a handle, so it writes what the outbox still
  // holds itself instead of waiting for the background thread to wake up and do it (a thread
  // hop of tens of us on a busy host). Async submissions keep waking the background thread,
  // which batches a burst into one write. Any thread.
  // Its time counts as blocked (blocked_time.h): it may run a round that waits for the peers.
  void send_pending() {
    const auto start = BlockedTime::Clock::now();
    parts_.cached_rounds->send_pending();
    parts_.telemetry->blocked_time().add(start, BlockedTime::Clock::now());
  }
  // Runs `call` when every rank agrees and returns its status; nullopt when it did not run
  // (submit it as usual). Any thread.
  std::optional<Status> try_fast_allreduce(const FastAllreduce& call) {
    return parts_.fast_path->try_allreduce(call);
  }

  // Any thread: a process set's members (id 0: every rank); nullopt when it does not exist.
  std::optional<ProcessSetMembers> process_set(uint32_t id) const {
    return parts_.process_sets->members(id);
  }
  std::vector<uint32_t> process_set_ids() const { return parts_.process_sets->ids(); }
  void set_process_set_removing(uint32_t id, bool removing) {
    parts_.process_sets->set_removing(id, removing);
  }
  uint64_t next_process_set_call() { return parts_.counters.next_process_set_call(); }
  // Any thread: the process set an op of this rank runs on, checked: `op_text` names the call.
  Result<ProcessSetMembers> process_set_of_mine(const ProcessSet& set,
                                               const std::string& op_text) const;

  const Topology& topology() const { return parts_.topology; }
  // Elastic jobs: the coordinator said slots were added since this init (Worker::hosts_updated).
  bool hosts_updated() const { return parts_.reader->hosts_updated(); }
  const std::string& job_id() const { return parts_.job_id; }
  const std::vector<std::string>& rank_hosts() const { return parts_.rank_hosts; }
  const Config& config() const { return parts_.config; }
  // Any thread: allocator for library-allocated CUDA outputs (see hvrun::DeviceAllocator).
  void set_device_allocator(DeviceAllocator allocator) {
    parts_.gpu->set_device_allocator(allocator);
    parts_.process_sets->set_device_allocator(std::move(allocator));
  }
  // Telemetry (worker_lib/telemetry/): the trainer's steps and their named phases, and the
  // job's timeline started / stopped at run time (the coordinator writes the file). Any thread.
  void mark_step() { parts_.telemetry->mark_step(); }
  void mark_phase(std::string_view name) { parts_.telemetry->mark_phase(name); }
  Status start_timeline(const std::string& path);
  Status stop_timeline();
  // Per-process counters of each process set, the same on its ranks by the callers' contract.
  uint64_t next_barrier_id(uint32_t process_set) {
    return parts_.counters.next_barrier_id(process_set);
  }
  uint64_t next_group_id(uint32_t process_set) { return parts_.counters.next_group_id(process_set); }

 private:
  explicit Runtime(const Config& config);
  Status send_timeline_control(const std::string& filename);
  // A wait on `op`'s handle that blocks counts as this rank's blocked time.
  void count_waits_of(PendingOp& op) const {
    if (op.handle) op.handle->blocked = parts_.telemetry->blocked();
  }

  RuntimeParts parts_;
  RuntimeLifecycle lifecycle_{parts_};
};

}  // namespace hvrun::detail
