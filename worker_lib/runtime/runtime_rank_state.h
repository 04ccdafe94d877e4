// The runtime's parts as the steady state sees them (agreement/rank_state.h): the shared work
// state read at one instant under its lock, the submitter's outbox and request cache, and
// whether the timeline records. The fast path and the cached rounds pay one virtual call per
// question (a few per round or blocking call); the per-op loop of a round runs here, inside
// take_outbox, with none.
#pragma once

#include <cstdint>
#include <vector>

#include "worker_lib/agreement/rank_state.h"
#include "worker_lib/runtime/submitter.h"
#include "worker_lib/runtime/work_state.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

class RuntimeRankState final : public RankState {
 public:
  RuntimeRankState(WorkState& state, Submitter& submitter,
                   const telemetry::WorkerTelemetry& telemetry)
      : state_(state), submitter_(submitter), telemetry_(telemetry) {}

  bool idle() override;
  bool waiting_for_coordinator() override;
  Status explain_failure(Status failed) override {
    return state_.explain_failure(std::move(failed));
  }
  const RequestCache& negotiated() const override { return submitter_.cache(); }
  bool outbox_may_hold() override;
  Taken take_outbox(uint32_t max_id, std::vector<HeldOp>& held) override;
  bool start_agreed(const std::vector<HeldOp>& agreed) override;
  void send_held(std::vector<HeldOp>& held) override;
  void send_outbox() override { submitter_.flush_outbox(); }
  void send_pending() override { submitter_.send_pending(); }

 private:
  WorkState& state_;
  Submitter& submitter_;
  const telemetry::WorkerTelemetry& telemetry_;
  std::vector<uint32_t> outbox_ids_;  // take_outbox's: the outbox's cache ids, found once
};

}  // namespace hvrun::detail
