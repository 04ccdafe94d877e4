// The executor's lock and the fast path's round counter, shared by the background thread (each
// plan) and an API thread (a fast collective): whoever holds `mutex` runs the next event, so a
// fast collective falls between the same two plans on every rank. `events` counts plans
// executed plus fast collectives run; idle ranks have counted the same events, which is how
// they meet in the same round of the job's round agreement (worker_lib/round_agreement.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "worker_lib/round_agreement.h"

namespace hvrun::detail {

class ExecutionLane {
 public:
  // Outermost lock of the runtime's lock order (runtime/work_state.h); held while an event (plan
  // or fast collective) runs.
  std::mutex mutex;

  // Set once before the runtime's threads start: the job's round agreement, or null.
  void set_rounds(RoundAgreement* rounds) { rounds_ = rounds; }
  RoundAgreement* rounds() const { return rounds_; }

  uint64_t events() const { return events_.load(); }
  // `mutex` held: counts an event and returns the round this rank moves past.
  uint64_t advance() { return events_.fetch_add(1); }

  // Any thread: this rank will not take part in the round it would join now (it sent the
  // coordinator something, or shuts down): peers waiting in it need not wait for it.
  void refuse_current_round() { refuse(events_.load()); }
  void refuse(uint64_t round) {
    if (rounds_) rounds_->refuse(static_cast<uint32_t>(round));
  }
  // After an event: refuses the new round when this rank still waits for the coordinator (a
  // join, an op sent meanwhile), as the rank's state said once the event ran.
  void refuse_if_busy(bool waiting_for_coordinator) {
    if (waiting_for_coordinator) refuse_current_round();
  }

 private:
  RoundAgreement* rounds_ = nullptr;
  std::atomic<uint64_t> events_{0};
};

}  // namespace hvrun::detail
