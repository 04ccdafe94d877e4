#include "worker_lib/runtime/plan_runner.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"
#include "worker_lib/runtime/named_thread.h"
#include "worker_lib/runtime/stream_reader.h"

namespace hvrun::detail {
namespace {

// A gap between submissions this long ends a burst (a Python trainer's come a few us apart).
constexpr std::chrono::microseconds kBurstPause{100};

// Whether this rank's handles of a response completed OK (timeline "done" status).
bool succeeded(const std::vector<std::shared_ptr<PendingOp>>& entries) {
  for (const auto& e : entries) {
    if (!e) continue;
    std::lock_guard<std::mutex> lock(e->handle->mutex);
    if (!e->handle->status.is_ok()) return false;
  }
  return true;
}

}  // namespace

void PlanRunner::start() {
  thread_ = start_named_thread("hvrun-loop", [this] { loop(); });
}

bool PlanRunner::gathering() const {
  return c_.cycle_time.count() > 0 && c_.rounds.enabled();
}

bool PlanRunner::gathers() const {
  const WorkState& s = c_.state;
  if (!gathering() || s.outbox.empty() ||
      !s.inbox.empty() || s.stop_requested || s.stream_ended || s.abort_reason ||
      s.plans_received != s.plans_started || s.waiting_for_coordinator())
    return false;
  return std::all_of(s.outbox.begin(), s.outbox.end(),
                     [](const auto& op) { return RequestCache::may_run_fast(*op); });
}

void PlanRunner::loop() {
  WorkState& state = c_.state;
  bool stream_done = false;
  std::unique_lock<std::mutex> lock(state.mutex);
  while (true) {
    const auto woken = [&] {
      return !state.outbox.empty() || !state.inbox.empty() || state.stop_requested ||
             (state.stream_ended && !stream_done) || state.abort_reason.has_value();
    };
    // Between batches it sleeps until something arrives, without looking every cycle: a look
    // wakes this thread on a core where a rank reduces (on a host with a core per rank, every
    // core), and the ranks waiting for that one at the data plane's next barrier wait with it
    // (bench/RESULTS.md, section 31). A batch that may gather wakes it through a timer, a
    // cycle after its first submission, unless a caller took it by then (Submitter::submit).
    state.loop_idle = true;
    state.wake.wait(lock, woken);
    state.loop_idle = false;
    if (gathers()) {
      // As the coordinator lets ready tensors wait for company: a step's tensors then run as
      // a few fused responses instead of a round each. A thread that waits for one of them
      // meanwhile takes the outbox and runs it at once (CachedRounds::send_pending).
      const auto stop_gathering = [&] {
        return state.outbox.empty() || !RequestCache::may_run_fast(*state.outbox.back()) ||
               !state.inbox.empty() || state.stop_requested || state.stream_ended ||
               state.abort_reason.has_value();
      };
      state.wake.wait_until(lock, state.outbox_since + c_.cycle_time, stop_gathering);
      // A burst still coming in gathers on, up to twice the cycle time, until it pauses: a
      // Python trainer's 161 submissions of a step can take longer than the cycle (a few us
      // each, on caches the last step's reduction emptied), and a round taken mid-burst runs
      // part of the step on the core where the trainer still submits the rest, then a second
      // round for the rest.
      const auto cap = state.outbox_since + 2 * c_.cycle_time;
      while (!stop_gathering() && std::chrono::steady_clock::now() < cap &&
             std::chrono::steady_clock::now() - state.outbox_latest < kBurstPause)
        state.wake.wait_until(lock, std::min(state.outbox_latest + kBurstPause, cap),
                              stop_gathering);
    }
    // The outbox is taken inside flush_outbox(), under the sender's lock: taking it here and
    // writing it later would let an API thread's flush write a later op (a join) before it.
    const bool outbox_waiting = !state.outbox.empty();
    std::deque<v1::CoordinatorMessage> inbox;
    inbox.swap(state.inbox);
    std::optional<std::string> abort_reason = std::exchange(state.abort_reason, std::nullopt);
    bool stop = state.stop_requested;
    bool ended = state.stream_ended;
    lock.unlock();

    if (abort_reason && !ended) send_abort_request(*abort_reason);
    if (outbox_waiting) c_.rounds.dispatch();
    for (auto& message : inbox) handle_message(message);
    if (ended && !stream_done) {
      stream_done = true;
      // Normally terminal already (the reader's JobAbort or its account of the lost stream).
      state.terminate(unavailable("rank " + std::to_string(c_.rank) +
                                  ": the negotiation stream to the coordinator at " +
                                  c_.coordinator_address + " ended"));
    }
    lock.lock();
    if (stop) break;
  }
}

bool PlanRunner::left_peers_waiting() {
  // Only plans this rank takes part in keep peers waiting (another process set's plans only
  // pass it by, and so does an error response, such as the one for a peer's call made after
  // this rank left: tearing down then would fail peers still finishing a collective this rank
  // completed).
  if (skipped_plan_) return true;
  std::lock_guard<std::mutex> lock(c_.state.mutex);
  for (const v1::CoordinatorMessage& message : c_.state.inbox)
    if (message.kind_case() == v1::CoordinatorMessage::kPlan &&
        c_.process_sets.takes_part_in(message.plan()))
      return true;
  return false;
}

void PlanRunner::send_abort_request(const std::string& reason) {
  v1::WorkerMessage message;
  v1::AbortRequest* a = message.mutable_abort();
  a->set_reason(reason);
  a->set_rank(c_.rank);
  a->set_host(c_.host);
  if (!c_.stream.write(message)) (void)c_.client.abort(*a);
}

void PlanRunner::handle_message(v1::CoordinatorMessage& message) {
  switch (message.kind_case()) {
    case v1::CoordinatorMessage::kWelcome:
      SPDLOG_DEBUG("coordinator welcomed us; first plan seq {}", message.welcome().first_plan_seq());
      break;
    case v1::CoordinatorMessage::kPlan:
      execute_plan(*message.mutable_plan());
      break;
    case v1::CoordinatorMessage::kAbort: {
      Status status = job_abort_status(message.abort());
      SPDLOG_ERROR("{}", status.message());
      c_.state.terminate(status);
      break;
    }
    case v1::CoordinatorMessage::kTimeline:
      break;  // the reader thread already switched recording (telemetry)
    default:
      SPDLOG_WARN("ignoring an unknown message from the coordinator");
  }
}

void PlanRunner::execute_plan(v1::Plan& plan) {
  // Every rank counts every plan it executes, in the same order: the fast path's rounds.
  std::lock_guard<std::mutex> exec_lock(c_.lane.mutex);
  // This rank moves past round `passed` without taking part in it: a peer waiting there (for a
  // blocking call this rank's API thread has yet to make) must not wait for it.
  c_.lane.refuse(c_.lane.advance());
  if (plan.seq() <= last_plan_seq_ && last_plan_seq_ != 0) {
    c_.state.terminate(internal_error("coordinator sent plan seq " + std::to_string(plan.seq()) +
                                      " after " + std::to_string(last_plan_seq_) +
                                      " (sequence must increase; protocol error)"));
    return;
  }
  last_plan_seq_ = plan.seq();
  if (Status restored = cached_names_.restore(plan); !restored.is_ok()) {
    c_.state.terminate(std::move(restored));
    return;
  }
  // Take every tensor of the plan out of the in-flight table at once: a JobAbort that arrives
  // while this plan runs fails only what no received plan covers (see StreamReader), and tears
  // the data plane down, so the collective running now fails with the abort's reason.
  std::vector<std::vector<std::shared_ptr<PendingOp>>> plan_entries;
  {
    std::lock_guard<std::mutex> lock(c_.state.mutex);
    ++c_.state.plans_started;
    if (c_.state.terminal) {  // arrived after the job ended: everything already failed
      // Peers wait for this rank only in a plan it takes part in.
      if (c_.process_sets.takes_part_in(plan)) skipped_plan_ = true;
      return;
    }
    for (const v1::Response& response : plan.responses()) {
      auto& entries = plan_entries.emplace_back();
      if (response.error_ranks_size() > 0) continue;  // someone's duplicate; see below
      const uint32_t set = response.process_set_id();
      for (const auto& t : response.tensors()) {
        // A name of another set's response is not this one (a rank outside `set` may have an
        // op of that name in flight on a set of its own): null.
        entries.push_back(c_.state.in_flight.take(t.name(), set));
      }
    }
  }
  for (int i = 0; i < plan.responses_size(); ++i) {
    const v1::Response& response = plan.responses(i);
    const auto& entries = plan_entries[static_cast<size_t>(i)];
    if (response.error_ranks_size() > 0) {
      // A duplicate submission on those ranks; the first one stays in flight. This library
      // refuses duplicates before sending them, so there is nothing to fail here.
      SPDLOG_WARN("coordinator: {}", response.error());
      continue;
    }
    PlanExecutor* executor = executor_for(response);
    if (!executor) continue;  // a set without this rank
    c_.telemetry.on_response_started(plan.seq(), response);
    if (!response.error().empty()) {
      for (const auto& e : entries)
        if (e) e->handle->complete(invalid_argument(response.error()));
      executor->record_ended(entries, false);
      c_.telemetry.on_response_done(response, false);
      continue;
    }
    if (response.op() == v1::COLLECTIVE_OP_PROCESS_SET_ADD ||
        response.op() == v1::COLLECTIVE_OP_PROCESS_SET_REMOVE) {
      change_process_sets(response, entries);
      executor->record_ended(entries, true);
      c_.telemetry.on_response_done(response, true);
      continue;
    }
    c_.submitter.remember_cache_ids(response, entries);
    // Another process set's communicator runs only once the global one's work is done.
    if (executor != &c_.executor && response.device() == v1::DEVICE_KIND_CUDA)
      c_.executor.drain_gpu();
    if (!c_.telemetry.recording()) {
      executor->execute(response, entries);
      continue;
    }
    // The timeline's "done" when the handles completed: for CUDA tensors, after execute()
    // returned (the GPU executor's thread).
    executor->execute(response, entries,
                      [&telemetry = c_.telemetry, done = response, entries](auto) {
                        telemetry.on_response_done(done, succeeded(entries));
                      });
  }
  finished_plan_seq_.store(plan.seq());
  // Still waiting for something (a join, an op sent meanwhile): this rank cannot take part
  // in the round the plan just moved it to, and peers should not wait for it there.
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(c_.state.mutex);
    busy = c_.state.waiting_for_coordinator();
  }
  c_.lane.refuse_if_busy(busy);
}

PlanExecutor* PlanRunner::executor_for(const v1::Response& response) {
  const uint32_t set = response.process_set_id();
  return set == 0 ? &c_.executor : c_.process_sets.executor(set);
}

void PlanRunner::change_process_sets(const v1::Response& response, const ResponseEntries& entries) {
  Status status;
  int result = -1;
  if (response.op() == v1::COLLECTIVE_OP_PROCESS_SET_ADD) {
    result = static_cast<int>(response.created_process_set_id());
    status = c_.process_sets.add(response.created_process_set_id(),
                                 {response.process_set_members().begin(),
                                  response.process_set_members().end()});
  } else {
    result = response.root_rank();
    c_.process_sets.remove(static_cast<uint32_t>(response.root_rank()));
  }
  for (const auto& e : entries) {
    if (!e) continue;
    e->handle->join_result = result;
    e->handle->complete(status);
  }
  if (status.is_ok()) return;
  // The other ranks now hold a set this rank lacks: its collectives would wait for this rank
  // until their timeout. The job ends at once instead, naming this rank and why.
  SPDLOG_ERROR("{}", status.message());
  send_abort_request("rank " + std::to_string(c_.rank) + " on host " + c_.host + ": " +
                     status.message());
  c_.state.terminate(status);
}

}  // namespace hvrun::detail
