// The one state the runtime's parts share under one lock: the background thread's inbox (what
// the submitters, the reader and the lifecycle hand it) and the table of ops in flight.
//
// Why one lock for all of it: the fast path (agreement/fast_path.h) and the cached rounds
// (agreement/cached_rounds.h) decide whether this rank may meet its peers in a round by looking
// at every field below at one instant (nothing in flight, nothing unsent, no message unhandled,
// no abort or stop asked; runtime_rank_state.h is how they look); split over several locks that
// look would see a state that never existed.
// Everything else has one owner and lives there: the API calls' counters (call_counters.h), the
// phase of start and stop (lifecycle.h), the coordinator's HostsUpdated (stream_reader.h), the
// plans that went unexecuted (plan_runner.h), the batch timer's state (submitter.h).
//
// `wake` is the background thread's wake-up, also waited on by shutdown (the stream's end) and
// by explain_failure (the job's abort reason).
//
// The runtime's lock order (the only place it is written; take them in this order, never the
// reverse):
//   1. ExecutionLane::mutex   the executor's lock: a plan, or a fast collective
//   2. Submitter's send lock  one RequestBatch writer at a time; guards the request cache
//   3. WorkState::mutex       this state
//   4. ProcessSetPlanes' lock (taken under WorkState::mutex; the sets' executors' locks nest
//      inside it when it aborts them)
// Leaves, held with nothing else taken inside (some under WorkState::mutex): CallCounters'
// lock, Heartbeat's lock, NegotiationStream's write lock, a HandleState's mutex, the GPU
// executor's lock, WorkerTelemetry's mutex, ReportSender's lock.
// RuntimeLifecycle's phase and StreamReader's hosts_updated are atomics, no lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"
#include "hvrun.pb.h"
#include "worker_lib/execution/pending_op.h"
#include "worker_lib/runtime/in_flight_table.h"

namespace hvrun::detail {

struct WorkState {
  std::mutex mutex;
  std::condition_variable wake;
  // Every field below is guarded by `mutex`; the comment says which part writes it.

  // Submissions (submitter.h; the cached rounds hold some back and run them).
  InFlightTable in_flight;  // by name
  std::deque<std::shared_ptr<PendingOp>> outbox;        // not yet sent
  std::chrono::steady_clock::time_point outbox_since;   // when the outbox last stopped being empty
  std::chrono::steady_clock::time_point outbox_latest;  // when the latest op joined it
  // Ops in `in_flight` that the cached rounds hold (cached_rounds.h): not sent, not in outbox.
  size_t held_for_rounds = 0;

  // The background thread (plan_runner.h). It sleeps until woken: a submission wakes it (one
  // that may gather, through the batch timer a cycle later), unless it is gathering or working
  // already (it looks at the outbox before it sleeps again).
  bool loop_idle = false;
  uint64_t plans_started = 0;

  // The reader thread (stream_reader.h): the coordinator's messages, for the background thread.
  std::deque<v1::CoordinatorMessage> inbox;
  uint64_t plans_received = 0;
  bool stream_ended = false;

  // The lifecycle (lifecycle.h): through request_abort and request_stop only.
  std::optional<std::string> abort_reason;  // abort() asked, not yet sent
  bool stop_requested = false;

  // Any part, once (terminate): the runtime stops taking work.
  std::optional<Status> terminal;

  // Fails every in-flight op with `status` and makes later submissions fail with it too; the
  // first status wins. Any thread, `mutex` not held.
  void terminate(Status status);
  // Asks the background thread to send an AbortRequest; false when the job already ended or an
  // abort is already asked. `mutex` not held.
  bool request_abort(const std::string& reason);
  // Shutdown: from now on every submission fails with `refusal`, and the background thread
  // ends once it has handled what it holds. `mutex` not held.
  void request_stop(Status refusal);
  // `mutex` held: an op this rank sent waits for the coordinator's plan. (An unsent op may
  // still run by agreement, cached_rounds.h; one that cannot refuses the round when it is
  // submitted, and again when it is sent.)
  bool waiting_for_coordinator() const {
    return in_flight.size() > held_for_rounds + outbox.size();
  }
  // A failed collective's status, or the job's abort reason when one arrives shortly after
  // (the coordinator's JobAbort names the dead rank; the data plane only says "connection
  // reset"). `mutex` not held.
  Status explain_failure(Status failed);
};

}  // namespace hvrun::detail
