// One job's coordinator state, shared by the gRPC handlers: rendezvous, key-value store,
// negotiation loop, who is connected, how the job ended, and the owner's event callback.
//
// Generations: a job's workers may leave cleanly (every rank said Goodbye) and register again
// in the same processes (init -> shutdown -> init, as Horovod test suites do per test case).
// Each such round is a Generation with a fresh rendezvous, key-value store (the data planes'
// bootstrap keys) and negotiation loop (plan seqs, cache ids); the ranks stay the same. A
// registration that arrives while the current generation still runs waits (bounded by the
// start timeout) until every rank of it has left; after an abort it gets the abort's status.
// The job's end is the current generation's: OK between generations, until someone registers.
//
// Elastic jobs: each membership is a generation too, with its own size and plan. A lost rank
// ends its generation only (`resetting`): the survivors hear a JobAbort marked
// membership_changed and register again, waiting (bounded by the elastic timeout) for the
// owner's next plan (change_membership), which opens the next generation. Added slots
// (add_slots) wait for every current rank's Goodbye at their next commit, as in init after
// shutdown, and the next generation takes the plan given. Start-up and every reset are the
// same rendezvous. Hot spares (hvrun --spares; WorkerInfo.spare): a spare whose slot neither
// the current membership nor the next one given has waits outside every membership, without
// the elastic timeout, until a membership names its slot (the owner gives it a lost rank's
// place), the job fails or the server stops. Another worker of no plan is not parked.
//
// Threads: every method may be called from any thread; mutex_ guards the end state and the
// generations.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "coordinator/rendezvous/kv_store.h"
#include "coordinator/rendezvous/rendezvous.h"
#include "coordinator/service/autopsy_collector.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/service/event_dispatcher.h"
#include "coordinator/service/negotiation_loop.h"
#include "coordinator/telemetry/aggregator.h"

namespace hvrun::coordinator::service {

class Job;

// One round of registration and negotiation (see above). Kept alive, stopped, until the Job
// goes: handlers holding a reference to an old generation stay valid.
struct Generation {
  Generation(Job& job, int number, std::vector<PlannedRank> plan, int world_size);
  const int number;  // 0 for the first registration, then 1, 2, ...
  const int world_size;
  const std::vector<PlannedRank> plan;  // empty, or world_size slots
  // Elastic: a lost rank ended this membership (guarded by the Job's mutex_).
  bool resetting = false;
  Rendezvous rendezvous;
  KvStore kv;
  NegotiationLoop loop;
};

class Job {
 public:
  Job(CoordinatorOptions options, CoordinatorServer::EventCallback on_event);
  ~Job();

  const CoordinatorOptions& options() const { return options_; }
  // The current generation (valid for the Job's lifetime, also after a newer one started).
  Generation& current();
  Rendezvous& rendezvous() { return current().rendezvous; }
  KvStore& kv() { return current().kv; }
  NegotiationLoop& loop() { return current().loop; }

  // Registers a worker in the current generation, or, when that one's rendezvous already
  // completed (a worker's init after its shutdown), in the next one once every rank left.
  Result<Registered> register_worker(const v1::WorkerInfo& worker);
  // The same, answered through `done` (the gRPC Register): a registration in a rendezvous that
  // is still open waits without a thread (Rendezvous::register_async); the others (a worker
  // registering again, a survivor waiting for the next membership) wait on a thread of the job's.
  void register_worker_async(const v1::WorkerInfo& worker, Rendezvous::Done done);
  // Stops every generation's negotiation thread (the server is shutting down).
  void stop_loops();
  // The job's telemetry and timeline (coordinator/telemetry/aggregator.h), across generations.
  telemetry::Aggregator& telemetry() { return telemetry_; }
  const telemetry::Aggregator& telemetry() const { return telemetry_; }

  // Job-wide abort: first reason wins; every stream, waiter and later caller gets it.
  void abort(const std::string& reason, int rank, const std::string& host);
  // The server stops: ends a running job with CANCELLED (streams hear it), without an event.
  void shutdown();
  // A stream of `generation` ended without Goodbye.
  void worker_lost(Generation& generation, int rank);
  // Elastic jobs (coordinator/service/coordinator_server.h).
  void change_membership(std::vector<PlannedRank> plan, const std::string& reason, int rank,
                         const std::string& host);
  void add_slots(std::vector<PlannedRank> plan, int added);
  // Elastic: the slots of the latest membership whose ranks all registered (empty before).
  std::vector<PlannedRank> formed_membership() const;
  // Ranks of the current generation that registered but have not opened their negotiation
  // stream (coordinator_server.h); empty while its rendezvous is incomplete.
  std::vector<int> registered_without_stream();
  // Why the job was ended: the first abort, else the rendezvous' own failure; nullopt while
  // neither happened. Recorded before any worker hears of it.
  std::optional<AbortCause> abort_cause() const;
  // The launcher saw rank `rank`'s process end: it can never register (again) in this job.
  void worker_exited(int rank, const std::string& how);
  // Asks every rank for an autopsy (autopsy_collector.h); false when one is under way or the
  // job does not run. The result goes to the owner as a kAutopsy event.
  // `then`, if any, runs once it is done (an abort that waits for the autopsy).
  bool autopsy(const std::string& trigger, std::function<void()> then = nullptr);
  void on_autopsy_report(int rank, const v1::AutopsyReport& report);

  // The job's end: OK (every rank left cleanly) or why it failed; nullopt while it runs.
  std::optional<Status> end_status() const;
  std::optional<Status> wait_for_end(std::chrono::milliseconds timeout);

 private:
  friend struct Generation;
  void emit(CoordinatorEvent event);
  void end(Status status);  // records the end (first wins) and fails every waiter with it
  void on_rendezvous_end(Generation& generation, const Status& status);
  NegotiationLoop::Hooks loop_hooks();
  // Elastic: ends `generation` only; every survivor's stream hears `reason` (requires
  // generation.resetting set under mutex_, so that nothing else ends it).
  void reset(Generation& generation, const std::string& reason, int rank, const std::string& host);
  // Requires mutex_: opens the next generation (with next_plan_ when the owner gave one).
  Generation& open_next_locked(Generation& now);
  // Requires mutex_: `worker` is a hot spare (see above) while `now` is the current generation.
  bool parked_spare_locked(const Generation& now, const v1::WorkerInfo& worker) const;
  // What a registration in `generation` is told names its resources (shared-memory segments).
  std::string job_id_of(const Generation& generation) const;
  std::optional<v1::RankInfo> rank_info(int rank);

  const CoordinatorOptions options_;
  EventDispatcher events_;  // declared before what posts to it: outlives them, delivers all
  telemetry::Aggregator telemetry_;  // before the generations: their loops report to it

  mutable std::mutex mutex_;
  std::condition_variable ended_cv_;
  std::vector<std::unique_ptr<Generation>> generations_;  // guarded by mutex_; back() = current
  // Guarded by mutex_: elastic, the next generation's plan (add_slots), taken when it opens.
  std::optional<std::vector<PlannedRank>> next_plan_;
  std::vector<PlannedRank> formed_;  // guarded by mutex_: formed_membership()
  std::optional<Status> end_;  // guarded by mutex_: the current generation's end
  bool aborting_ = false;      // guarded by mutex_: the first abort() won
  std::optional<AbortCause> abort_cause_;  // guarded by mutex_: that abort's cause
  // Guarded by mutex_: the first rank of this generation that left while others waited for it.
  std::optional<AbortCause> departure_;
  // Guarded by mutex_: ranks whose process ended, and how; every generation's rendezvous hears.
  std::vector<std::pair<int, std::string>> exited_;
  // Guarded by mutex_: when a stall warning last asked for an autopsy (one per interval).
  std::optional<std::chrono::steady_clock::time_point> stall_autopsy_at_;
  // Loop thread only: a stall shutdown or heartbeat abort waits for its autopsy.
  bool abort_awaits_autopsy_ = false;
  // Aborts for a timeout (stall shutdown, heartbeat) after an autopsy, when autopsies are on.
  void abort_after_autopsy(const std::string& trigger, const std::string& reason, int rank,
                           const std::string& host);
  // Guarded by mutex_: the threads of registrations that wait for another generation, joined
  // by the destructor; `stopping_`: the server stops or the destructor runs, none starts.
  struct WaitingRegistration {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> answered;  // set by the thread as its last act
  };
  std::vector<WaitingRegistration> waiting_registrations_;
  bool stopping_ = false;
  // Runs register_worker(worker) on a new thread of waiting_registrations_, then `done`.
  void register_on_thread(const v1::WorkerInfo& worker, Rendezvous::Done done);
  AutopsyCollector autopsies_;  // last: its thread posts events until it is stopped
};

}  // namespace hvrun::coordinator::service
