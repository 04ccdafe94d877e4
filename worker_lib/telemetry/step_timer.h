// One rank's training steps, timed for straggler attribution: each mark_step() ends a step (the
// first one starts at init) and records how long it took, how long this rank's trainer threads
// were blocked in hvrun during it (blocked_time.h) and, when the trainer names the phases of its
// step with mark_phase("data") ... mark_phase("forward") ..., each phase's busy time (its
// duration less the time blocked inside it). The records travel in the next TelemetryReport
// (StepTiming); the coordinator compares ranks step by step
// (coordinator/telemetry/straggler_tracker.h).
//
// Cost: mark_step() and mark_phase() take an uncontended mutex and read the clock once; they
// run once per step or phase, never per collective. Records wait for the report sender in a
// bounded queue (the oldest are dropped, and counted, beyond it).
//
// Threads: every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hvrun.pb.h"
#include "worker_lib/blocked_time.h"

namespace hvrun::detail::telemetry {

class StepTimer {
 public:
  using Clock = BlockedTime::Clock;

  StepTimer(const BlockedTime& blocked, size_t max_pending = 4096);

  // Starts phase `name` now, ending the one running (if any); "" only ends it. The same name
  // marked twice in one step adds up.
  void mark_phase(std::string_view name);
  // Ends the running phase and the step.
  void mark_step();

  // Moves the steps ended since the last call into `report` (StepTiming, oldest first, and the
  // count dropped meanwhile).
  void take(v1::TelemetryReport& report);
  bool has_pending() const;

 private:
  // mutex_ held: adds the running phase's busy time up to (now, blocked_now) and ends it.
  void end_phase_locked(Clock::time_point now, uint64_t blocked_now);

  const BlockedTime& blocked_;
  const size_t max_pending_;

  mutable std::mutex mutex_;
  uint64_t step_ = 0;  // steps ended
  Clock::time_point step_start_;
  uint64_t step_blocked_start_ = 0;
  std::string phase_;  // running phase; "" = none
  Clock::time_point phase_start_;
  uint64_t phase_blocked_start_ = 0;
  std::vector<std::pair<std::string, uint64_t>> phases_;  // this step's busy ns, first marked first
  std::deque<v1::StepTiming> pending_;
  uint64_t dropped_ = 0;
};

}  // namespace hvrun::detail::telemetry
