#include "worker_lib/telemetry/worker_telemetry.h"

#include <algorithm>
#include <cassert>
#include <set>

#include "proto/collective_op_name.h"

namespace hvrun::detail::telemetry {
namespace {

uint64_t ns_between(PhaseClock::time_point start, PhaseClock::time_point end) {
  return end > start ? static_cast<uint64_t>(
                           std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count())
                     : 0;
}

bool is_data_op(v1::CollectiveOp op) {
  return op != v1::COLLECTIVE_OP_BARRIER && op != v1::COLLECTIVE_OP_JOIN &&
         op != v1::COLLECTIVE_OP_UNSPECIFIED;
}

const char* op_text(v1::CollectiveOp op) { return collective_op_name(op); }

std::mutex& step_registry_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::set<WorkerTelemetry*>& step_registry() {
  static std::set<WorkerTelemetry*> live;
  return live;
}

}  // namespace

WorkerTelemetry::WorkerTelemetry(std::string cpu_backend, size_t max_buffered_events)
    : cpu_backend_(std::move(cpu_backend)),
      max_events_(max_buffered_events),
      steady_anchor_(PhaseClock::now()),
      wall_anchor_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()) {
  counters_.reserve(16);
  fast_[0].backend = cpu_backend_ + "-fast";
  fast_[1].backend = "nccl-fast";
}

int64_t WorkerTelemetry::wall_us(PhaseClock::time_point t) const {
  return wall_anchor_us_ +
         std::chrono::duration_cast<std::chrono::microseconds>(t - steady_anchor_).count();
}

v1::CollectiveStats& WorkerTelemetry::counters(v1::CollectiveOp op, std::string_view backend) {
  for (Counters& c : counters_)
    if (c.op == op && c.backend == backend) return c.stats;
  Counters& added = counters_.emplace_back();
  added.op = op;
  added.backend = std::string(backend);
  added.stats.set_op(op);
  added.stats.set_backend(added.backend);
  return added.stats;
}

std::string_view WorkerTelemetry::backend_of(const v1::Response& r) const {
  return r.device() == v1::DEVICE_KIND_CUDA ? std::string_view("nccl")
                                            : std::string_view(cpu_backend_);
}

std::string WorkerTelemetry::response_lane(const ResponseGist& r) {
  if (r.tensors == 0) return op_text(r.op);
  if (r.tensors == 1) return std::string(r.first_name);
  return "fused " + std::to_string(r.tensors) + ": " + std::string(r.first_name) + " + " +
         std::to_string(r.tensors - 1) + " more";
}

void WorkerTelemetry::on_phase(const ResponseGist& response, Phase phase,
                               PhaseClock::time_point start, PhaseClock::time_point end,
                               uint64_t bytes, std::string_view backend) {
  const uint64_t ns = ns_between(start, end);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    v1::CollectiveStats& c = counters(response.op, backend);
    switch (phase) {
      case Phase::kPack: c.set_pack_ns(c.pack_ns() + ns); break;
      case Phase::kUnpack: c.set_unpack_ns(c.unpack_ns() + ns); break;
      case Phase::kCollective:
        c.set_collective_ns(c.collective_ns() + ns);
        c.set_responses(c.responses() + 1);
        c.set_tensors(c.tensors() + static_cast<uint64_t>(response.tensors));
        c.set_bytes(c.bytes() + bytes);
        break;
    }
    ++version_;
  }
  if (!recording()) return;
  v1::TimelineEvent event;
  event.set_lane(response_lane(response));
  event.set_name(phase_name(phase));
  event.set_start_unix_us(wall_us(start));
  event.set_duration_us(static_cast<int64_t>(ns / 1000));
  auto& args = *event.mutable_args();
  args["backend"] = std::string(backend);
  args["bytes"] = std::to_string(bytes);
  args["op"] = op_text(response.op);
  if (response.tensors > 1) args["tensors"] = std::to_string(response.tensors);
  add_event(std::move(event));
}

void WorkerTelemetry::on_submitted(const std::string& name, v1::CollectiveOp op) {
  if (!recording()) return;
  v1::TimelineEvent event;
  event.set_lane(name);
  event.set_name("submitted");
  event.set_start_unix_us(wall_us(PhaseClock::now()));
  event.set_duration_us(-1);
  (*event.mutable_args())["op"] = op_text(op);
  add_event(std::move(event));
}

void WorkerTelemetry::on_plan_received(uint64_t seq) {
  Arrival& slot = arrivals_[seq % kPlanRing];
  slot.steady_ns.store(PhaseClock::now().time_since_epoch().count(), std::memory_order_relaxed);
  slot.seq.store(seq, std::memory_order_release);
}

void WorkerTelemetry::on_response_started(uint64_t seq, const v1::Response& r) {
  const auto now = PhaseClock::now();
  const Arrival& slot = arrivals_[seq % kPlanRing];
  PhaseClock::time_point received = now;
  if (slot.seq.load(std::memory_order_acquire) == seq)
    received = PhaseClock::time_point(PhaseClock::duration(slot.steady_ns.load(std::memory_order_relaxed)));
  const uint64_t ns = ns_between(received, now);
  if (is_data_op(r.op()) && r.error().empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    v1::CollectiveStats& c = counters(r.op(), backend_of(r));
    c.set_queue_ns(c.queue_ns() + ns);
    ++version_;
  }
  if (!recording()) return;
  v1::TimelineEvent event;
  event.set_lane(response_lane(r));
  event.set_name("queued");
  event.set_start_unix_us(wall_us(received));
  event.set_duration_us(static_cast<int64_t>(ns / 1000));
  (*event.mutable_args())["plan"] = std::to_string(seq);
  add_event(std::move(event));
}

void WorkerTelemetry::on_response_done(const v1::Response& r, bool ok) {
  if (!recording()) return;
  const int64_t now_us = wall_us(PhaseClock::now());
  for (const auto& t : r.tensors()) {
    v1::TimelineEvent event;
    event.set_lane(t.name());
    event.set_name("done");
    event.set_start_unix_us(now_us);
    event.set_duration_us(-1);
    auto& args = *event.mutable_args();
    args["status"] = ok ? "ok" : "failed";
    if (r.tensors_size() > 1) args["batch"] = response_lane(r);
    add_event(std::move(event));
  }
}

void WorkerTelemetry::instant(const std::string& lane, const std::string& name) {
  if (!recording()) return;
  v1::TimelineEvent event;
  event.set_lane(lane);
  event.set_name(name);
  event.set_start_unix_us(wall_us(PhaseClock::now()));
  event.set_duration_us(-1);
  add_event(std::move(event));
}

void WorkerTelemetry::set_recording(bool on) { recording_.store(on, std::memory_order_relaxed); }

void WorkerTelemetry::set_pile_up_callback(size_t threshold, std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(mutex_);
  pile_up_threshold_ = threshold;
  on_pile_up_ = std::move(callback);
}

bool WorkerTelemetry::push_event(v1::TimelineEvent event) {
  if (events_.size() >= max_events_) {
    ++dropped_;  // the sender cannot keep up (or the stream is gone): keep memory bounded
    return false;
  }
  events_.push_back(std::move(event));
  if (pile_up_threshold_ > 0 && !pile_up_signalled_ && events_.size() >= pile_up_threshold_) {
    pile_up_signalled_ = true;
    return true;
  }
  return false;
}

void WorkerTelemetry::add_event(v1::TimelineEvent event) {
  bool signal = false;
  std::function<void()> callback;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    signal = push_event(std::move(event));
    if (signal) callback = on_pile_up_;
  }
  if (signal && callback) callback();
}

void WorkerTelemetry::on_fast_collective(v1::CollectiveOp op, PhaseClock::time_point start,
                                         PhaseClock::time_point end, uint64_t bytes, bool on_gpu) {
  // The fast path runs allreduces only: its counters have no op of their own.
  assert(op == v1::COLLECTIVE_OP_ALLREDUCE);
  (void)op;
  FastCounters& fast = fast_[on_gpu ? 1 : 0];
  fast.responses.fetch_add(1, std::memory_order_relaxed);
  fast.ns.fetch_add(ns_between(start, end), std::memory_order_relaxed);
  fast.bytes.fetch_add(bytes, std::memory_order_relaxed);
}

bool WorkerTelemetry::FastCounters::unfolded() const {
  return responses.load(std::memory_order_relaxed) != folded_responses ||
         ns.load(std::memory_order_relaxed) != folded_ns ||
         bytes.load(std::memory_order_relaxed) != folded_bytes;
}

void WorkerTelemetry::fold_fast_counters(FastCounters& fast) {
  // Three separate adds: a fold between them sees some grown and not the others, so any growth
  // counts (the rest follows at the next fold).
  const uint64_t responses = fast.responses.load(std::memory_order_relaxed);
  const uint64_t ns = fast.ns.load(std::memory_order_relaxed);
  const uint64_t bytes = fast.bytes.load(std::memory_order_relaxed);
  if (responses == fast.folded_responses && ns == fast.folded_ns && bytes == fast.folded_bytes)
    return;
  v1::CollectiveStats& c = counters(v1::COLLECTIVE_OP_ALLREDUCE, fast.backend);
  c.set_responses(c.responses() + responses - fast.folded_responses);
  c.set_tensors(c.tensors() + responses - fast.folded_responses);
  c.set_collective_ns(c.collective_ns() + ns - fast.folded_ns);
  c.set_bytes(c.bytes() + bytes - fast.folded_bytes);
  fast.folded_responses = responses;
  fast.folded_ns = ns;
  fast.folded_bytes = bytes;
  ++version_;
}

v1::TelemetryReport WorkerTelemetry::take_report() {
  v1::TelemetryReport report;
  std::vector<v1::TimelineEvent> events;
  uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (FastCounters& fast : fast_) fold_fast_counters(fast);
    for (const Counters& c : counters_) *report.add_collectives() = c.stats;
    events.swap(events_);
    events_.reserve(std::min<size_t>(events.size(), 4096));
    dropped = std::exchange(dropped_, 0);
    reported_version_ = version_;
    reported_steps_ = steps();
    pile_up_signalled_ = false;
    report.set_timeline_recording(recording());
  }
  report.set_steps(reported_steps_);
  step_timer_.take(report);
  auto* out = report.mutable_events();
  out->Reserve(static_cast<int>(events.size() + (dropped ? 1 : 0)));
  for (auto& e : events) *out->Add() = std::move(e);
  if (dropped > 0) {
    v1::TimelineEvent marker;
    marker.set_lane("timeline");
    marker.set_name("events dropped");
    marker.set_start_unix_us(wall_us(PhaseClock::now()));
    marker.set_duration_us(-1);
    (*marker.mutable_args())["count"] = std::to_string(dropped);
    *out->Add() = std::move(marker);
  }
  report.set_sent_unix_us(wall_us(PhaseClock::now()));
  return report;
}

bool WorkerTelemetry::changed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return version_ != reported_version_ || steps() != reported_steps_ || !events_.empty() ||
         step_timer_.has_pending() ||
         dropped_ > 0 || fast_[0].unfolded() || fast_[1].unfolded();
}

size_t WorkerTelemetry::buffered_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

uint64_t WorkerTelemetry::dropped_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

void register_for_steps(WorkerTelemetry* telemetry) {
  std::lock_guard<std::mutex> lock(step_registry_mutex());
  step_registry().insert(telemetry);
}

void unregister_for_steps(WorkerTelemetry* telemetry) {
  std::lock_guard<std::mutex> lock(step_registry_mutex());
  step_registry().erase(telemetry);
}

void mark_step_everywhere() {
  std::lock_guard<std::mutex> lock(step_registry_mutex());
  for (WorkerTelemetry* t : step_registry()) t->mark_step();
}

void mark_phase_everywhere(std::string_view name) {
  std::lock_guard<std::mutex> lock(step_registry_mutex());
  for (WorkerTelemetry* t : step_registry()) t->mark_phase(name);
}

}  // namespace hvrun::detail::telemetry
