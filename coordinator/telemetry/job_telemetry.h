// A point-in-time snapshot of what a job's ranks are doing: the contract between the
// coordinator's telemetry aggregator (which fills it from worker TelemetryReports and its own
// negotiation bookkeeping), the Prometheus /metrics endpoint, and hvrun's end-of-job summary.
//
// Plain values only: taking a snapshot copies, so readers on other threads (the HTTP server,
// the launcher at the end of the job) never hold the coordinator's locks.
//
// CoordinatorServer::telemetry() returns it; the aggregator beside it (aggregator.h) fills it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hvrun::coordinator::telemetry {

// One rank's data-plane work for one (collective, backend) pair, cumulative since its init.
struct CollectiveTotals {
  std::string op;       // "allreduce", "allgather", "broadcast", "alltoall", "reducescatter"
  std::string backend;  // "shm", "gloo", "hierarchical", "nccl", "local"
  uint64_t tensors = 0;
  uint64_t responses = 0;
  uint64_t bytes = 0;
  double collective_seconds = 0;
  double pack_seconds = 0;
  double unpack_seconds = 0;
  double queue_seconds = 0;
};

// One GPU as the rank's last report saw it (NVML). Values NVML could not read are -1.
struct GpuTelemetry {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  double utilization_percent = -1;
  int64_t memory_used_bytes = -1;
  int64_t memory_total_bytes = -1;
  double temperature_celsius = -1;
  double power_watts = -1;
};

// How much one named phase (hvrun::mark_phase) of a rank took, on average over the steps in
// which that rank arrived last, against the median of the other ranks in the same steps.
struct PhaseGrowth {
  std::string phase;
  double seconds = 0;         // this rank's busy time in the phase
  double others_seconds = 0;  // the other ranks' (median per step)
  double growth() const { return seconds - others_seconds; }
};

struct RankTelemetry {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  bool alive = true;    // stream attached and not lost
  bool joined = false;  // called join() and waits for the others

  std::vector<CollectiveTotals> collectives;  // from the rank's reports

  // Coordinator's bookkeeping, over this rank's requests:
  double negotiation_seconds = 0;  // request arrived -> plan holding it sent, summed per tensor
  // Wall time spent waiting for other ranks to submit what this rank submitted: tensors waited
  // for at the same time count that time once (never more than the job's time).
  double wait_seconds = 0;
  uint64_t tensors_negotiated = 0;
  uint64_t cache_hits = 0;         // requests sent as a cache id only
  uint64_t stalls = 0;             // stall warnings that named this rank as missing

  uint64_t steps = 0;              // hvrun::mark_step() count
  double step_rate = 0;            // steps per second over the last reports (0: unknown)
  std::vector<GpuTelemetry> gpus;

  // Straggler attribution from the ranks' step timings (telemetry/straggler_tracker.h). A
  // rank's lateness in a step: the most any rank was blocked in hvrun in it, less this rank's
  // own blocked time (how long the others waited for it). "Last": the latest rank of the step.
  uint64_t last_steps = 0;             // steps in which this rank arrived last
  double lateness_seconds = 0;         // summed over every attributed step
  // Over the recent attributed steps (the last 2048): quantiles of this rank's lateness, and
  // the median of those in which it was last.
  double lateness_p50_seconds = 0;
  double lateness_p90_seconds = 0;
  double lateness_p99_seconds = 0;
  double last_lateness_median_seconds = 0;
  std::vector<PhaseGrowth> phase_growth;  // the steps it was last; largest growth first

  // The tensor this rank waited longest for (other ranks late), and how long.
  std::string longest_wait_tensor;
  double longest_wait_seconds = 0;
  double seconds_since_report = -1;  // -1: no report yet
};

// A rank slow enough for long enough to be replaced (--replace-stragglers): last by at least
// the threshold in `late_steps` of the last `window` attributed steps of this membership.
struct StragglerEvidence {
  int rank = -1;
  std::string host;
  int late_steps = 0;
  int window = 0;
  double threshold_seconds = 0;
  double lateness_median_seconds = 0;  // over those late steps
};

struct JobTelemetry {
  std::string job_id;
  int world_size = 0;
  int ranks_alive = 0;
  int ranks_joined = 0;
  int restarts = 0;  // filled by the launcher (the coordinator lives for one attempt)
  uint64_t steps = 0;       // the slowest rank's step count
  double step_rate = 0;     // the slowest rank's step rate
  // Fusion: responses that carried more than one tensor, their payload, and the threshold.
  uint64_t fused_responses = 0;
  uint64_t fused_bytes = 0;
  int64_t fusion_threshold_bytes = 0;
  uint64_t plans = 0;
  bool timeline_recording = false;
  uint64_t attributed_steps = 0;  // steps every rank's timing arrived for (straggler attribution)
  std::vector<RankTelemetry> ranks;  // by rank
  // --replace-stragglers: the rank to replace now, if one is (straggler_tracker.h).
  std::optional<StragglerEvidence> replaceable_straggler;
};

}  // namespace hvrun::coordinator::telemetry
