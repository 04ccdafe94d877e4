// Submission and the outbox: API threads hand ops in (submit), and RequestBatches go to the
// coordinator from whichever thread gets there first: the background thread (woken by a
// submission, so a burst of async submissions goes as one batch) or a caller about to block on
// a handle (send_pending: it writes its own batch instead of waiting for a thread hop). Full
// metadata the first time, only the cache id once the coordinator assigned one and the
// metadata is unchanged (request_cache.h).
//
// Threads: every method from any thread. The sender's lock (work_state.h's order: after the
// executor's lock, before WorkState's) keeps one RequestBatch writer at a time and guards the
// request cache.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "hvrun/handle.h"
#include "worker_lib/agreement/execution_lane.h"
#include "worker_lib/agreement/request_cache.h"
#include "worker_lib/autopsy/flight_recorder.h"
#include "worker_lib/runtime/coordinator_client.h"
#include "worker_lib/runtime/one_shot_timer.h"
#include "worker_lib/runtime/work_state.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

class Submitter {
 public:
  Submitter(WorkState& state, ExecutionLane& lane, NegotiationStream& stream,
            telemetry::WorkerTelemetry& telemetry, int rank)
      : state_(state), lane_(lane), stream_(stream), telemetry_(telemetry), rank_(rank) {}

  // Takes ownership of `op`; returns its handle (already failed when the runtime is not
  // running or the name is in flight).
  Handle submit(std::shared_ptr<PendingOp> op);
  // submit() of the op `fill` describes (of the global set), reusing the last op of the same
  // name when nothing else holds it any more (InFlightTable::claim): a training step's
  // submissions then allocate nothing. `fill` runs under the state's mutex.
  template <typename Fill>
  Handle submit_reusing(const std::string& name, Fill&& fill) {
    Handle handle;
    Enqueued enqueued;
    {
      std::lock_guard<std::mutex> lock(state_.mutex);
      std::shared_ptr<PendingOp> op;
      if (!state_.terminal && (op = state_.in_flight.claim(name))) {
        fill(*op);
        handle = Handle(op->handle);
        record(*op);
        enqueued = enqueue_locked(std::move(op));
      }
    }
    if (!handle.valid()) {  // refused: submit() says why
      auto op = PendingOp::named(name);
      fill(*op);
      return submit(std::move(op));
    }
    after_enqueue(enqueued);
    return handle;
  }
  // All or nothing: every op is queued (in one batch), or every handle fails.
  std::vector<Handle> submit_group(std::vector<std::shared_ptr<PendingOp>> ops);
  // From now on a submission that may run by agreement (cached rounds) wakes no thread: the
  // first of a batch arms a timer that wakes the background thread `cycle` later, and a caller
  // that takes the batch first (send_pending, when it waits) disarms it. While that thread
  // gathers or works anyway (WorkState::loop_idle false), it looks at the outbox again before
  // sleeping. Before the background thread starts.
  Status let_batches_gather(std::chrono::microseconds cycle);
  // The state's mutex held, by whoever empties the outbox: the batch needs no timer any more.
  void batch_taken();
  // Ends the timer's thread (shutdown, once nothing can be submitted).
  void stop_batch_timer() { batch_timer_.stop(); }
  // Every submission from now on enters the flight recorder; null = off. Before the first one.
  void set_flight_recorder(FlightRecorder* recorder) { recorder_ = recorder; }
  // Sends what the outbox holds, unless it is empty (already sent or being sent).
  void send_pending();
  // Sends what the outbox holds.
  void flush_outbox();

  // The executor's lock held (the background thread, executing a plan): records the cache ids
  // of `response`.
  void remember_cache_ids(const v1::Response& response,
                          const std::vector<std::shared_ptr<PendingOp>>& entries);
  // The executor's lock held: the cache as the coordinator assigned it so far.
  const RequestCache& cache() const { return cache_; }

  // Runs `write` (a message of its own: Goodbye, a failure report) with no RequestBatch writer
  // in between; a batch an API thread took is written first.
  template <typename Write>
  auto exclusive(Write write) {
    std::lock_guard<std::mutex> lock(send_mutex_);
    return write();
  }

 private:
  // What queueing an op asks of the threads once the state's mutex is released.
  struct Enqueued {
    bool coordinator_only = false;  // it never runs by agreement: the current round is refused
    bool first = false;             // it starts a batch
    bool looks_anyway = false;      // the background thread looks at the outbox before it sleeps
  };
  // The state's mutex held, `op` in flight: into the outbox (and the batch timer armed).
  Enqueued enqueue_locked(std::shared_ptr<PendingOp> op);
  void after_enqueue(const Enqueued& e);  // the state's mutex released
  // Enters `op` in the flight recorder (its sequence goes into the op).
  void record(PendingOp& op);
  void record_refused(const PendingOp& op) {
    if (recorder_ != nullptr) recorder_->ended(op.flight_sequence, false);
  }
  void send_requests(std::deque<std::shared_ptr<PendingOp>>& batch);  // send_mutex_ held

  // The state's mutex held: the timer wakes the background thread for a batch still unsent.
  void batch_timer_fired();

  WorkState& state_;
  ExecutionLane& lane_;
  NegotiationStream& stream_;
  telemetry::WorkerTelemetry& telemetry_;
  int rank_;
  bool gather_ = false;
  std::chrono::microseconds cycle_{0};
  OneShotTimer batch_timer_{[this] { batch_timer_fired(); }};
  // The timer will wake the background thread for the batch in the outbox; guarded by the
  // state's mutex, since whoever empties the outbox disarms it there (batch_taken).
  bool batch_timer_armed_ = false;
  FlightRecorder* recorder_ = nullptr;
  std::mutex send_mutex_;
  RequestCache cache_;  // see request_cache.h for who writes it under which locks
};

}  // namespace hvrun::detail
