#include "worker_lib/runtime/submitter.h"

#include "common/logging.h"

namespace hvrun::detail {

void Submitter::record(PendingOp& op) {
  if (recorder_ == nullptr) return;
  op.flight_sequence = recorder_->submitted(
      op.name(), op.op, op.dtype,
      static_cast<uint64_t>(num_elements(op.shape)) * dtype_size(op.dtype), op.process_set);
}

Handle Submitter::submit(std::shared_ptr<PendingOp> op) {
  Handle handle(op->handle);
  record(*op);
  Enqueued enqueued;
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    if (state_.terminal) {
      record_refused(*op);
      op->handle->complete(*state_.terminal);
      return handle;
    }
    if (!state_.in_flight.add(op)) {
      record_refused(*op);
      op->handle->complete(already_exists(
          "rank " + std::to_string(rank_) + ": tensor '" + op->name() +
          "' submitted again while the previous one with that name is still in flight; wait "
          "for it first or use another name"));
      return handle;
    }
    enqueued = enqueue_locked(std::move(op));
  }
  after_enqueue(enqueued);
  return handle;
}

Submitter::Enqueued Submitter::enqueue_locked(std::shared_ptr<PendingOp> op) {
  Enqueued e;
  telemetry_.on_submitted(op->name(), op->op);
  // An op that can never run without the coordinator: peers waiting in a round for this
  // rank need not wait (others refuse the round when they are sent, send_requests).
  e.coordinator_only = !RequestCache::may_run_fast(*op);
  e.first = state_.outbox.empty();
  state_.outbox_latest = std::chrono::steady_clock::now();
  if (e.first) state_.outbox_since = state_.outbox_latest;
  state_.outbox.push_back(std::move(op));
  e.looks_anyway = gather_ && !state_.loop_idle;
  // A new batch that may run by agreement while the background thread sleeps: a timer wakes
  // it a cycle from now, unless a caller takes the batch first (batch_taken).
  if (gather_ && e.first && !e.looks_anyway && !e.coordinator_only) {
    batch_timer_armed_ = true;
    batch_timer_.arm(state_.outbox_since + cycle_);
  }
  return e;
}

void Submitter::after_enqueue(const Enqueued& e) {
  if (e.coordinator_only) lane_.refuse_current_round();
  // The background thread wakes at once for an op only the coordinator can run, and for a new
  // batch when batches do not gather; ops joining a batch it knows of cost no wake-up.
  if (e.coordinator_only || (e.first && !gather_ && !e.looks_anyway)) state_.wake.notify_all();
}

std::vector<Handle> Submitter::submit_group(std::vector<std::shared_ptr<PendingOp>> ops) {
  std::vector<Handle> handles;
  for (const auto& op : ops) {
    handles.emplace_back(op->handle);
    record(*op);
  }
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    std::optional<Status> refusal = state_.terminal;
    for (size_t i = 0; i < ops.size() && !refusal; ++i) {
      bool repeated = state_.in_flight.contains(ops[i]->name());
      for (size_t j = 0; j < i && !repeated; ++j) repeated = ops[j]->name() == ops[i]->name();
      if (repeated)
        refusal = already_exists("grouped allreduce: tensor '" + ops[i]->name() +
                                 "' is in flight already or named twice in the group");
    }
    if (refusal) {
      for (const auto& op : ops) {
        record_refused(*op);
        op->handle->complete(*refusal);
      }
      return handles;
    }
    for (auto& op : ops) {
      state_.in_flight.add(op);
      enqueue_locked(std::move(op));
    }
  }
  // A group's members run only through the coordinator: the round is refused, the thread woken.
  after_enqueue(Enqueued{.coordinator_only = true});
  return handles;
}

Status Submitter::let_batches_gather(std::chrono::microseconds cycle) {
  HVRUN_RETURN_IF_ERROR(batch_timer_.start("hvrun-batch"));
  cycle_ = cycle;
  gather_ = true;
  return Status::ok();
}

void Submitter::batch_taken() {
  if (batch_timer_armed_) {
    batch_timer_armed_ = false;
    batch_timer_.disarm();
  }
}

void Submitter::batch_timer_fired() {
  std::lock_guard<std::mutex> lock(state_.mutex);
  batch_timer_armed_ = false;
  if (!state_.outbox.empty()) state_.wake.notify_all();
}

void Submitter::send_pending() {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    if (state_.outbox.empty()) return;  // the background thread sent it already (or is sending it)
  }
  flush_outbox();
}

void Submitter::flush_outbox() {
  // Taking the outbox and writing it under the same send_mutex_ keeps batches in submission
  // order: a join must never reach the coordinator before an op this rank submitted earlier.
  std::lock_guard<std::mutex> send_lock(send_mutex_);
  std::deque<std::shared_ptr<PendingOp>> outbox;
  bool ended = false;
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    // Ops held by the cached rounds were submitted before these: their thread sends both, in
    // that order, when the rounds give up.
    if (state_.held_for_rounds > 0) return;
    outbox.swap(state_.outbox);
    batch_taken();
    ended = state_.stream_ended;
  }
  if (!outbox.empty() && !ended) send_requests(outbox);
}

void Submitter::send_requests(std::deque<std::shared_ptr<PendingOp>>& batch) {
  // The coordinator takes a batch's full requests first, then its cached ids: a full request
  // after a cached one (a join after a cached allreduce) starts a new batch, so the coordinator
  // sees this rank's submissions in their order. A batch holds one process set's requests.
  // This rank now waits for a plan: peers waiting for it in a round need not.
  lane_.refuse_current_round();
  v1::WorkerMessage message;
  v1::RequestBatch* requests = message.mutable_requests();
  bool written = true;
  for (const auto& op : batch) {
    if (op->process_set != requests->process_set_id()) {
      if (requests->requests_size() > 0 || requests->cached_ids_size() > 0) {
        written = stream_.write(message) && written;
        requests->Clear();
      }
      requests->set_process_set_id(op->process_set);
    }
    if (std::optional<uint32_t> id = cache_.cached_id(*op)) {
      requests->add_cached_ids(*id);
    } else {
      if (requests->cached_ids_size() > 0) {
        written = stream_.write(message) && written;
        const uint32_t set = requests->process_set_id();
        requests->Clear();
        requests->set_process_set_id(set);
      }
      *requests->add_requests() = op->to_request();
    }
  }
  written = stream_.write(message) && written;
  if (!written) SPDLOG_DEBUG("request batch not sent: stream closed (the reader reports why)");
}

void Submitter::remember_cache_ids(const v1::Response& response,
                                   const std::vector<std::shared_ptr<PendingOp>>& entries) {
  std::lock_guard<std::mutex> send_lock(send_mutex_);  // the cache: also read by senders
  cache_.remember(response, entries);
}

}  // namespace hvrun::detail
