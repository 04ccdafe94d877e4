// What the coordinator's negotiation loop tells telemetry: every rank's request
// batches as they are negotiated, every plan as it is sent, and every stall warning. The
// telemetry aggregator (aggregator.h) turns these into per-rank negotiation / wait times,
// cache hits, stall counts and the timeline's "negotiated" slices.
//
// Threads: on_requests and on_stalls run under the negotiation loop's engine mutex (on the gRPC
// thread that received the batch, or the loop's clock thread), one at a time; on_plan runs on
// the thread sending plans, one at a time in seq order, and may overlap an on_requests. Never
// call back into the loop. Keep it cheap: it sits on the path of every plan (with the timeline
// on, formatting a report's events holds the aggregator's mutex and so delays negotiation).
#pragma once

#include <chrono>
#include <vector>

#include "coordinator/engine/negotiation_engine.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator::telemetry {

class NegotiationObserver {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~NegotiationObserver() = default;

  // `rank`'s batch was handed to the engine at `arrived`.
  virtual void on_requests(int rank, const v1::RequestBatch& batch, TimePoint arrived) = 0;
  // `plan` went to every attached stream at `sent`.
  virtual void on_plan(const v1::Plan& plan, TimePoint sent) = 0;
  // Stall warnings just logged (each names the missing ranks).
  virtual void on_stalls(const std::vector<StalledTensor>& stalls) = 0;
};

}  // namespace hvrun::coordinator::telemetry
