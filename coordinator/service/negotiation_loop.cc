#include "coordinator/service/negotiation_loop.h"

#include <spdlog/spdlog.h>

#include "coordinator/engine/tensor_meta.h"

namespace hvrun::coordinator::service {

namespace {
constexpr size_t kPlanSummaries = 4096;  // how many recent plans a stall report can name

// How often stalls, names used with different ops and silence are looked for: an eighth of
// the smallest threshold (a warning comes at most 12.5 % late), at most every 50 ms.
std::chrono::milliseconds stall_check_period(const NegotiationLoop::StallOptions& stall,
                                             std::chrono::milliseconds op_mismatch_grace) {
  std::chrono::milliseconds smallest = std::chrono::milliseconds::max();
  for (auto threshold :
       {stall.warning, stall.shutdown, stall.heartbeat_timeout, op_mismatch_grace}) {
    if (threshold.count() > 0) smallest = std::min(smallest, threshold);
  }
  return std::max(std::chrono::milliseconds(50), smallest / 8);
}

// What goes on the wire: the plan without the names and shapes its tensors' cache ids already
// say (ResponseTensor.as_cached), which is most of a steady step's plan.
v1::CoordinatorMessage wire_form(const v1::CoordinatorMessage& message) {
  v1::CoordinatorMessage wire = message;
  for (v1::Response& response : *wire.mutable_plan()->mutable_responses()) {
    for (v1::ResponseTensor& tensor : *response.mutable_tensors()) {
      if (!tensor.as_cached()) continue;
      tensor.clear_name();
      tensor.clear_shape();
    }
  }
  return wire;
}
}  // namespace

NegotiationLoop::NegotiationLoop(EngineOptions options, StallOptions stall, Hooks hooks)
    : world_size_(options.world_size),
      stall_(stall),
      op_mismatch_grace_(
          std::chrono::duration_cast<std::chrono::milliseconds>(options.op_mismatch_grace)),
      hooks_(std::move(hooks)),
      engine_(options),
      streams_(options.world_size),
      said_goodbye_(options.world_size, 0),
      attached_once_(options.world_size, 0),
      last_heard_(options.world_size),
      finished_seq_(options.world_size, 0),
      silent_reported_(options.world_size, 0) {
  if (stall_.warning.count() > 0 || stall_.shutdown.count() > 0 ||
      stall_.heartbeat_timeout.count() > 0 || op_mismatch_grace_.count() > 0) {
    next_stall_check_ =
        NegotiationEngine::Clock::now() + stall_check_period(stall_, op_mismatch_grace_);
  }
  thread_ = std::thread([this] { run(); });
}

NegotiationLoop::~NegotiationLoop() { stop(); }

void NegotiationLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    stopping_ = true;
  }
  inbox_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status NegotiationLoop::attach(int rank, std::shared_ptr<StreamSink> sink) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  if (abort_message_) {
    sink->send(abort_message_);
    sink->finish(abort_status_);
    if (rank >= 0 && rank < world_size_) attached_once_[rank] = 1;  // it heard why
    return abort_status_;
  }
  if (rank < 0 || rank >= world_size_) {
    return invalid_argument("Negotiate: Hello from rank " + std::to_string(rank) +
                            ", but the job has ranks 0-" + std::to_string(world_size_ - 1));
  }
  if (streams_[rank] || said_goodbye_[rank]) {
    return already_exists("Negotiate: rank " + std::to_string(rank) +
                          " already has (or had) a negotiation stream; one per worker");
  }
  streams_[rank] = sink;
  attached_once_[rank] = 1;
  heard_from(rank);
  v1::CoordinatorMessage welcome;
  welcome.mutable_welcome()->set_first_plan_seq(last_seq_ + 1);
  sink->send(serialize(welcome));
  return Status::ok();
}

void NegotiationLoop::detach(int rank, const StreamSink* sink) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  if (rank >= 0 && rank < world_size_ && streams_[rank].get() == sink) streams_[rank].reset();
}

void NegotiationLoop::expect_streams_by(NegotiationEngine::TimePoint deadline) {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    attach_deadline_ = deadline;
    deadline_changed_ = true;
  }
  inbox_cv_.notify_one();
}

std::vector<int> NegotiationLoop::ranks_without_stream() const {
  std::vector<int> ranks;
  std::lock_guard<std::mutex> lock(streams_mutex_);
  for (int r = 0; r < world_size_; ++r) {
    if (!attached_once_[r] && !said_goodbye_[r]) ranks.push_back(r);
  }
  return ranks;
}

void NegotiationLoop::check_streams_attached() {
  std::vector<int> missing;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    if (abort_message_) return;
    for (int r = 0; r < world_size_; ++r) {
      if (!attached_once_[r] && !said_goodbye_[r]) missing.push_back(r);
    }
  }
  if (!missing.empty() && hooks_.streams_missing) hooks_.streams_missing(missing);
}

void NegotiationLoop::heard_from(int rank, std::optional<uint64_t> finished_plan_seq) {
  if (rank < 0 || rank >= world_size_) return;
  std::lock_guard<std::mutex> lock(liveness_mutex_);
  last_heard_[rank] = NegotiationEngine::Clock::now();
  if (finished_plan_seq) finished_seq_[rank] = *finished_plan_seq;
}

std::string NegotiationLoop::rank_detail(int rank) {
  std::string detail = hooks_.rank_label ? hooks_.rank_label(rank) : "";
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(liveness_mutex_);
    seq = finished_seq_[rank];
  }
  detail += detail.empty() ? "" : "; ";
  if (seq == 0) return " (" + detail + "last completed operation: none yet)";
  auto it = plan_summaries_.find(seq);
  return " (" + detail + "last completed operation: " +
         (it != plan_summaries_.end() ? it->second : "plan " + std::to_string(seq)) + ")";
}

void NegotiationLoop::check_heartbeats(NegotiationEngine::TimePoint now) {
  if (stall_.heartbeat_timeout.count() <= 0) return;
  std::vector<std::pair<int, std::chrono::milliseconds>> silent;
  {
    std::lock_guard<std::mutex> streams_lock(streams_mutex_);
    if (abort_message_) return;
    std::lock_guard<std::mutex> lock(liveness_mutex_);
    for (int r = 0; r < world_size_; ++r) {
      if (!streams_[r] || said_goodbye_[r] || silent_reported_[r]) continue;
      const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard_[r]);
      if (quiet >= stall_.heartbeat_timeout) silent.emplace_back(r, quiet);
    }
  }
  for (const auto& [rank, quiet] : silent) {
    silent_reported_[rank] = 1;
    if (hooks_.silent) hooks_.silent(rank, quiet);
  }
}

void NegotiationLoop::check_stalls(NegotiationEngine::TimePoint now) {
  const auto smallest = stall_.warning.count() > 0 && (stall_.shutdown.count() == 0 ||
                                                       stall_.warning < stall_.shutdown)
                            ? stall_.warning
                            : stall_.shutdown;
  if (smallest.count() <= 0) return;
  std::set<std::string> still_stalled;
  std::vector<StalledTensor> to_warn;
  std::vector<StalledTensor> past_shutdown;
  std::vector<StalledTensor> stalled;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    stalled = engine_.stalled_tensors(now, smallest);
  }
  for (StalledTensor& stall : stalled) {
    // A name is a tensor of its process set: the same name on two sets is two stalls.
    const std::string key = std::to_string(stall.process_set_id) + "/" + stall.name;
    still_stalled.insert(key);
    if (stall.missing_ranks.empty()) continue;  // waits only for joined ranks: not a stall
    if (stall_.shutdown.count() > 0 && stall.waited >= stall_.shutdown) {
      past_shutdown.push_back(stall);
    }
    if (stall_.warning.count() > 0 && stall.waited >= stall_.warning && !warned_.count(key)) {
      warned_.insert(key);
      to_warn.push_back(std::move(stall));
    }
  }
  auto detail = [this](int rank) { return rank_detail(rank); };
  if (!to_warn.empty()) {
    std::string report;
    {
      std::lock_guard<std::mutex> lock(engine_mutex_);  // plan_summaries_; the observer
      report = describe_stalls(to_warn, detail);
      if (hooks_.observer) hooks_.observer->on_stalls(to_warn);
    }
    spdlog::warn("stall: {}", report);
    if (hooks_.stall_warned) hooks_.stall_warned();
  }
  if (!past_shutdown.empty()) {
    std::string report;
    {
      std::lock_guard<std::mutex> lock(engine_mutex_);  // plan_summaries_
      report = describe_stalls(past_shutdown, detail);
    }
    if (hooks_.stalled) hooks_.stalled(report, past_shutdown.front().missing_ranks.front());
    return;
  }
  // Forget tensors that moved on, so that a later stall of the same name is reported again.
  for (auto it = warned_.begin(); it != warned_.end();) {
    it = still_stalled.count(*it) ? std::next(it) : warned_.erase(it);
  }
}

void NegotiationLoop::check_op_mismatches(NegotiationEngine::TimePoint now) {
  if (op_mismatch_grace_.count() <= 0) return;
  std::vector<std::string> mismatches;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    mismatches = engine_.fail_op_mismatches(now);
    if (mismatches.empty()) return;
    take_plans_locked(now);
  }
  for (const std::string& message : mismatches) spdlog::error("{}", message);
  send_taken_plans();
}

void NegotiationLoop::report_departure_failures(const std::vector<DepartureFailure>& failures) {
  if (!hooks_.departed_rank_failed) return;
  for (const DepartureFailure& failure : failures)
    hooks_.departed_rank_failed(failure.rank, failure.message);
}

void NegotiationLoop::submit(int rank, v1::RequestBatch batch) {
  Status status;
  std::vector<DepartureFailure> departures;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    const auto now = NegotiationEngine::Clock::now();
    status = engine_.submit(rank, batch, now);
    // Telemetry's negotiation figures follow the global set (cache ids are per set).
    if (hooks_.observer && batch.process_set_id() == 0) hooks_.observer->on_requests(rank, batch, now);
    take_plans_locked(now);
    departures = engine_.take_departure_failures();
  }
  if (!status.is_ok() && hooks_.protocol_error) hooks_.protocol_error(rank, status);
  // Before the plan that fails the collective: a rank reacting to that failure (an uncaught
  // exception, a failure report) must not name itself before the rank that left is named.
  report_departure_failures(departures);
  send_taken_plans();
  wake_if_deadline_earlier();
}

void NegotiationLoop::take_plans_locked(NegotiationEngine::TimePoint now) {
  while (auto plan = engine_.take_plan(now)) {
    SPDLOG_TRACE("plan {} with {} responses", plan->seq(), plan->responses_size());
    const uint64_t seq = plan->seq();
    // What the plan ran, for stall reports ("the last operation rank r completed").
    for (int i = plan->responses_size() - 1; i >= 0; --i) {
      const v1::Response& response = plan->responses(i);
      if (!response.error().empty() || response.tensors_size() == 0) continue;
      std::string summary = std::string(engine::op_name(response.op())) + " '" +
                            response.tensors(response.tensors_size() - 1).name() + "'";
      if (response.tensors_size() > 1)
        summary += " (fused with " + std::to_string(response.tensors_size() - 1) + " more)";
      plan_summaries_[seq] = summary + " in plan " + std::to_string(seq);
      if (plan_summaries_.size() > kPlanSummaries) plan_summaries_.erase(plan_summaries_.begin());
      break;
    }
    Outgoing out;
    *out.wrapped.mutable_plan() = std::move(*plan);
    out.bytes = serialize(wire_form(out.wrapped));
    std::lock_guard<std::mutex> lock(send_mutex_);
    outgoing_.push_back(std::move(out));
  }
}

void NegotiationLoop::send_taken_plans() {
  std::unique_lock<std::mutex> lock(send_mutex_);
  if (sending_) return;  // that thread sends ours too, after its own (seq order)
  sending_ = true;
  while (!outgoing_.empty()) {
    Outgoing next = std::move(outgoing_.front());
    outgoing_.pop_front();
    lock.unlock();
    broadcast(next);
    lock.lock();
  }
  sending_ = false;
}

void NegotiationLoop::wake_if_deadline_earlier() {
  std::optional<NegotiationEngine::TimePoint> deadline;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    deadline = engine_.next_deadline();
  }
  if (!deadline) return;  // nothing waits for the clock: the steady state's common case
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    if (*deadline >= loop_waits_until_) return;
    deadline_changed_ = true;
  }
  inbox_cv_.notify_one();
}

void NegotiationLoop::goodbye(int rank) {
  bool everyone = false;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    if (rank < 0 || rank >= world_size_ || said_goodbye_[rank]) return;
    said_goodbye_[rank] = 1;
    everyone = ++goodbyes_ == world_size_;
  }
  std::vector<DepartureFailure> departures;
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    const auto now = NegotiationEngine::Clock::now();
    engine_.rank_departed(rank, now);
    take_plans_locked(now);
    departures = engine_.take_departure_failures();
  }
  report_departure_failures(departures);  // before the failing plan, as in submit()
  send_taken_plans();
  wake_if_deadline_earlier();
  if (everyone && hooks_.everyone_left) hooks_.everyone_left();
}

std::vector<StalledTensor> NegotiationLoop::waiting_tensors() {
  std::lock_guard<std::mutex> lock(engine_mutex_);
  return engine_.stalled_tensors(NegotiationEngine::Clock::now(), std::chrono::milliseconds(0));
}

void NegotiationLoop::send_to_all(const v1::CoordinatorMessage& message) {
  const auto bytes = serialize(message);
  std::lock_guard<std::mutex> delivery(delivery_mutex_);
  std::vector<std::shared_ptr<StreamSink>> streams;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    if (abort_message_) return;
    streams = streams_;
  }
  for (auto& stream : streams)
    if (stream) stream->send(bytes);
}

void NegotiationLoop::abort(const v1::JobAbort& message, const Status& status) {
  std::lock_guard<std::mutex> delivery(delivery_mutex_);
  std::vector<std::shared_ptr<StreamSink>> streams;
  {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    if (abort_message_) return;
    v1::CoordinatorMessage wrapped;
    *wrapped.mutable_abort() = message;
    abort_message_ = serialize(wrapped);
    abort_status_ = status;
    streams = streams_;
  }
  for (auto& stream : streams) {
    if (!stream) continue;
    stream->send(abort_message_);
    stream->finish(status);
  }
}

void NegotiationLoop::broadcast(const Outgoing& plan) {
  // A plan is queued on every stream before a JobAbort is queued on any. Were the abort to
  // overtake it on some streams only, a rank that ran the plan (a barrier) and then aborted
  // would fail that very plan on the ranks that had yet to receive it.
  std::unique_lock<std::mutex> delivery(delivery_mutex_);
  std::vector<std::shared_ptr<StreamSink>> streams;
  {
    // A stream attaching after this point is welcomed with first_plan_seq = seq + 1.
    std::lock_guard<std::mutex> lock(streams_mutex_);
    if (abort_message_) return;
    last_seq_ = plan.wrapped.plan().seq();
    streams = streams_;
  }
  for (auto& stream : streams) {
    if (stream) stream->send(plan.bytes);
  }
  delivery.unlock();
  if (hooks_.observer) {
    hooks_.observer->on_plan(plan.wrapped.plan(), NegotiationEngine::Clock::now());
  }
}

void NegotiationLoop::run() {
  for (;;) {
    bool check_attached = false;
    {
      // Anyone changing the engine from now on tells this thread its deadline (see
      // wake_if_deadline_earlier), until it sleeps knowing the engine's deadline.
      std::lock_guard<std::mutex> lock(inbox_mutex_);
      loop_waits_until_ = NegotiationEngine::TimePoint::max();
      deadline_changed_ = false;
    }
    std::optional<NegotiationEngine::TimePoint> deadline;
    {
      std::lock_guard<std::mutex> lock(engine_mutex_);
      deadline = engine_.next_deadline();
    }
    {
      std::unique_lock<std::mutex> lock(inbox_mutex_);
      auto has_work = [&] { return stopping_ || deadline_changed_; };
      for (const auto& other : {attach_deadline_, next_stall_check_}) {
        if (other && (!deadline || *other < *deadline)) deadline = other;
      }
      loop_waits_until_ = deadline.value_or(NegotiationEngine::TimePoint::max());
      if (deadline) {
        inbox_cv_.wait_until(lock, *deadline, has_work);
      } else {
        inbox_cv_.wait(lock, has_work);
      }
      if (stopping_) return;
      if (attach_deadline_ && NegotiationEngine::Clock::now() >= *attach_deadline_) {
        attach_deadline_.reset();
        check_attached = true;
      }
    }
    if (check_attached) check_streams_attached();
    if (next_stall_check_ && NegotiationEngine::Clock::now() >= *next_stall_check_) {
      check_op_mismatches(NegotiationEngine::Clock::now());
      check_stalls(NegotiationEngine::Clock::now());
      check_heartbeats(NegotiationEngine::Clock::now());
      next_stall_check_ =
          NegotiationEngine::Clock::now() + stall_check_period(stall_, op_mismatch_grace_);
    }
    {
      std::lock_guard<std::mutex> lock(engine_mutex_);
      take_plans_locked(NegotiationEngine::Clock::now());
    }
    send_taken_plans();
  }
}

}  // namespace hvrun::coordinator::service
