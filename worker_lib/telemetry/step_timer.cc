#include "worker_lib/telemetry/step_timer.h"

#include <algorithm>

namespace hvrun::detail::telemetry {
namespace {
uint64_t ns_between(StepTimer::Clock::time_point start, StepTimer::Clock::time_point end) {
  return end > start
             ? static_cast<uint64_t>(
                   std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count())
             : 0;
}
}  // namespace

StepTimer::StepTimer(const BlockedTime& blocked, size_t max_pending)
    : blocked_(blocked),
      max_pending_(std::max<size_t>(max_pending, 1)),
      step_start_(Clock::now()),
      step_blocked_start_(blocked.total_ns()) {}

void StepTimer::end_phase_locked(Clock::time_point now, uint64_t blocked_now) {
  if (phase_.empty()) return;
  const uint64_t elapsed = ns_between(phase_start_, now);
  const uint64_t blocked = blocked_now - phase_blocked_start_;
  const uint64_t busy = elapsed > blocked ? elapsed - blocked : 0;
  auto it = std::find_if(phases_.begin(), phases_.end(),
                         [&](const auto& p) { return p.first == phase_; });
  if (it == phases_.end())
    phases_.emplace_back(std::move(phase_), busy);
  else
    it->second += busy;
  phase_.clear();
}

void StepTimer::mark_phase(std::string_view name) {
  const auto now = Clock::now();
  const uint64_t blocked_now = blocked_.total_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  end_phase_locked(now, blocked_now);
  if (name.empty()) return;
  phase_.assign(name);
  phase_start_ = now;
  phase_blocked_start_ = blocked_now;
}

void StepTimer::mark_step() {
  const auto now = Clock::now();
  const uint64_t blocked_now = blocked_.total_ns();
  std::lock_guard<std::mutex> lock(mutex_);
  end_phase_locked(now, blocked_now);
  v1::StepTiming timing;
  timing.set_step(++step_);
  timing.set_duration_ns(ns_between(step_start_, now));
  timing.set_blocked_ns(blocked_now - step_blocked_start_);
  for (auto& [name, busy] : phases_) {
    v1::StepPhaseTime* phase = timing.add_phases();
    phase->set_name(std::move(name));
    phase->set_busy_ns(busy);
  }
  phases_.clear();
  step_start_ = now;
  step_blocked_start_ = blocked_now;
  if (pending_.size() >= max_pending_) {
    pending_.pop_front();  // the report sender cannot keep up (or the stream is gone)
    ++dropped_;
  }
  pending_.push_back(std::move(timing));
}

void StepTimer::take(v1::TelemetryReport& report) {
  std::deque<v1::StepTiming> steps;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    steps.swap(pending_);
    report.set_step_timings_dropped(std::exchange(dropped_, 0));
  }
  auto* out = report.mutable_step_timings();
  out->Reserve(static_cast<int>(steps.size()));
  for (auto& s : steps) *out->Add() = std::move(s);
}

bool StepTimer::has_pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !pending_.empty() || dropped_ > 0;
}

}  // namespace hvrun::detail::telemetry
