// hvrun's end-of-job telemetry summary: one compact table, per rank time in
// collectives, bytes moved and the bandwidth that makes, negotiation and waiting; then the
// slowest rank and the tensor that waited longest. Printed after the job, success or failure,
// when the workers reported anything (--summary, on by default).
#pragma once

#include <optional>
#include <string>

#include "coordinator/telemetry/job_telemetry.h"

namespace hvrun::launcher {

// True when some rank reported data-plane work or negotiated a tensor.
bool has_telemetry(const coordinator::telemetry::JobTelemetry& job);

// Every line starts with "hvrun: "; "" when has_telemetry() is false.
std::string format_telemetry_summary(const coordinator::telemetry::JobTelemetry& job);

// Which rank held the others back, and why it was chosen (for the summary and its test):
// the rank most often named missing in stall warnings; else, when every rank's step rate is
// known and they differ by more than 5%, the slowest; else, when steps were attributed
// (straggler attribution from the ranks' step timings), the rank that arrived last in most
// steps; else the rank that waited least for the others in negotiation (the one they waited
// for).
// nullopt with fewer than two ranks.
struct SlowestRank {
  int rank = -1;
  std::string reason;
};
std::optional<SlowestRank> find_slowest_rank(const coordinator::telemetry::JobTelemetry& job);

// The straggler line's text after "hvrun: straggler: ": "rank 1 on HOST was last in 92% of
// 120 steps, 38.0 ms late at the median; its phase "data" grew most: 39.1 ms against 1.2 ms on
// the other ranks". "" without attributed steps.
std::string describe_straggler(const coordinator::telemetry::JobTelemetry& job);

// "512 B", "1.5 KiB", "3.2 GiB".
std::string format_bytes(double bytes);

}  // namespace hvrun::launcher
