#include "coordinator/metrics/job_metrics.h"

#include <array>
#include <functional>

namespace hvrun::coordinator::metrics {
namespace {

using telemetry::CollectiveTotals;
using telemetry::GpuTelemetry;
using telemetry::JobTelemetry;
using telemetry::RankTelemetry;

constexpr MetricType kCounter = MetricType::kCounter;
constexpr MetricType kGauge = MetricType::kGauge;

// ---- Per rank and (collective, backend): the data plane, from the workers' reports.
constexpr MetricFamily kCollectiveBytes{
    "hvrun_collective_bytes_total", kCounter,
    "Payload bytes of this rank's tensors moved by collectives, by op and backend."};
constexpr MetricFamily kCollectiveOperations{
    "hvrun_collective_operations_total", kCounter,
    "Collectives run by this rank (a fused response counts once), by op and backend."};
constexpr MetricFamily kCollectiveTensors{
    "hvrun_collective_tensors_total", kCounter,
    "Tensors completed by this rank (a fused response of 5 tensors counts 5), by op and backend."};
constexpr MetricFamily kCollectiveSeconds{
    "hvrun_collective_seconds_total", kCounter,
    "Seconds this rank spent inside the backend's collectives, by op and backend."};
constexpr MetricFamily kPackSeconds{
    "hvrun_collective_pack_seconds_total", kCounter,
    "Seconds this rank spent copying/scaling tensors into fusion buffers, by op and backend."};
constexpr MetricFamily kUnpackSeconds{
    "hvrun_collective_unpack_seconds_total", kCounter,
    "Seconds this rank spent copying/scaling results out of fusion buffers, by op and backend."};
constexpr MetricFamily kQueueSeconds{
    "hvrun_collective_queue_seconds_total", kCounter,
    "Seconds between a plan reaching this rank and its execution starting, by op and backend."};

// ---- Per rank: the coordinator's negotiation bookkeeping and the rank's state.
constexpr MetricFamily kNegotiationSeconds{
    "hvrun_negotiation_seconds_total", kCounter,
    "Seconds this rank's requests spent in negotiation (request arrived to plan sent)."};
constexpr MetricFamily kWaitSeconds{
    "hvrun_wait_seconds_total", kCounter,
    "Wall time this rank waited for other ranks to submit what it submitted (overlapping "
    "waits count once)."};
constexpr MetricFamily kTensorsNegotiated{
    "hvrun_tensors_negotiated_total", kCounter,
    "Tensors this rank negotiated (divide hvrun_negotiation_seconds_total by it for latency)."};
constexpr MetricFamily kCacheHits{"hvrun_cache_hits_total", kCounter,
                                  "Requests this rank sent as a response-cache id only."};
constexpr MetricFamily kStalls{"hvrun_stalls_total", kCounter,
                               "Stall warnings that named this rank as missing."};
constexpr MetricFamily kSteps{"hvrun_steps_total", kCounter,
                              "hvrun::mark_step() calls of this rank."};
constexpr MetricFamily kRankStepRate{
    "hvrun_rank_step_rate", kGauge,
    "Steps per second of this rank over its last reports (absent while unknown)."};
constexpr MetricFamily kRankAlive{"hvrun_rank_alive", kGauge,
                                  "1 while this rank's stream is attached and not lost, else 0."};
constexpr MetricFamily kRankJoined{
    "hvrun_rank_joined", kGauge,
    "1 once this rank called join() and waits for the others, else 0."};
constexpr MetricFamily kReportAge{
    "hvrun_rank_report_age_seconds", kGauge,
    "Seconds since this rank's last telemetry report (absent before the first)."};

// ---- Per rank: straggler attribution from the ranks' step timings
// (coordinator/telemetry/straggler_tracker.h).
constexpr MetricFamily kRankLastSteps{
    "hvrun_rank_last_steps_total", kCounter,
    "Steps in which this rank arrived last (the others waited for it)."};
constexpr MetricFamily kRankLateness{
    "hvrun_rank_lateness_seconds", MetricType::kSummary,
    "This rank's lateness per step (the most any rank was blocked in hvrun in the step less this "
    "rank's own blocked time): quantiles over its last 2048 attributed steps, sum and count over "
    "all (absent before the first)."};
constexpr MetricFamily kRankPhaseGrowth{
    "hvrun_rank_phase_growth_seconds", kGauge,
    "Per named phase (hvrun::mark_phase): this rank's busy time in it less the other ranks' "
    "(median), averaged over the steps in which this rank arrived last."};

// ---- Per job.
constexpr MetricFamily kJobInfo{"hvrun_job_info", kGauge,
                                "Always 1; the current attempt's job id as a label."};
constexpr MetricFamily kWorldSize{"hvrun_world_size", kGauge, "Ranks in the job."};
constexpr MetricFamily kRanksAlive{"hvrun_ranks_alive", kGauge,
                                   "Ranks whose stream is attached and not lost."};
constexpr MetricFamily kRanksJoined{"hvrun_ranks_joined", kGauge,
                                    "Ranks that called join() and wait for the others."};
constexpr MetricFamily kRestarts{"hvrun_restarts_total", kCounter,
                                 "Times hvrun restarted the job (--max-restarts)."};
constexpr MetricFamily kJobSteps{"hvrun_job_steps_total", kCounter,
                                 "Steps of the slowest rank (hvrun::mark_step())."};
constexpr MetricFamily kStepRate{"hvrun_step_rate", kGauge,
                                 "Steps per second of the slowest rank (absent while unknown)."};
constexpr MetricFamily kAttributedSteps{
    "hvrun_straggler_attributed_steps_total", kCounter,
    "Steps whose timing arrived from every rank, each attributed to the rank that arrived last."};
constexpr MetricFamily kPlans{"hvrun_plans_total", kCounter,
                              "Plans the coordinator sent (each to every rank)."};
constexpr MetricFamily kFusedResponses{"hvrun_fused_responses_total", kCounter,
                                       "Responses that carried more than one tensor."};
constexpr MetricFamily kFusedBytes{"hvrun_fused_bytes_total", kCounter,
                                   "Payload bytes of responses that carried more than one tensor."};
constexpr MetricFamily kFusionThreshold{"hvrun_fusion_threshold_bytes", kGauge,
                                        "Largest fused response, in bytes (0: fusion off)."};
constexpr MetricFamily kFusionFill{
    "hvrun_fusion_fill_ratio", kGauge,
    "Fused bytes / (fused responses x fusion threshold): how full fused buffers are, 0 to 1."};
constexpr MetricFamily kTimelineRecording{"hvrun_timeline_recording", kGauge,
                                          "1 while the timeline is being recorded, else 0."};

// ---- Per GPU (NVML, in the workers' reports).
constexpr MetricFamily kGpuUtilization{"hvrun_gpu_utilization_percent", kGauge,
                                       "GPU utilization over NVML's last sample period, percent."};
constexpr MetricFamily kGpuMemoryUsed{"hvrun_gpu_memory_used_bytes", kGauge,
                                      "GPU memory in use, bytes."};
constexpr MetricFamily kGpuMemoryTotal{"hvrun_gpu_memory_total_bytes", kGauge,
                                       "GPU memory installed, bytes."};
constexpr MetricFamily kGpuTemperature{"hvrun_gpu_temperature_celsius", kGauge,
                                       "GPU die temperature, degrees Celsius."};
constexpr MetricFamily kGpuPower{"hvrun_gpu_power_watts", kGauge, "GPU power draw, watts."};

constexpr std::array kFamilies = {
    kCollectiveBytes,
    kCollectiveOperations,
    kCollectiveTensors,
    kCollectiveSeconds,
    kPackSeconds,
    kUnpackSeconds,
    kQueueSeconds,
    kNegotiationSeconds,
    kWaitSeconds,
    kTensorsNegotiated,
    kCacheHits,
    kStalls,
    kSteps,
    kRankStepRate,
    kRankAlive,
    kRankJoined,
    kReportAge,
    kRankLastSteps,
    kRankLateness,
    kRankPhaseGrowth,
    kJobInfo,
    kWorldSize,
    kRanksAlive,
    kRanksJoined,
    kRestarts,
    kJobSteps,
    kStepRate,
    kAttributedSteps,
    kPlans,
    kFusedResponses,
    kFusedBytes,
    kFusionThreshold,
    kFusionFill,
    kTimelineRecording,
    kGpuUtilization,
    kGpuMemoryUsed,
    kGpuMemoryTotal,
    kGpuTemperature,
    kGpuPower,
};

Labels rank_labels(const RankTelemetry& r) {
  return {{"rank", std::to_string(r.rank)},
          {"host", r.host},
          {"local_rank", std::to_string(r.local_rank)}};
}

// One family with a sample per rank.
void per_rank(ExpositionWriter& w, const MetricFamily& family, const JobTelemetry& job,
              const std::function<double(const RankTelemetry&)>& value) {
  w.begin(family);
  for (const RankTelemetry& r : job.ranks) w.sample(rank_labels(r), value(r));
}

// One family with a sample per rank and (op, backend).
void per_collective(ExpositionWriter& w, const MetricFamily& family, const JobTelemetry& job,
                    const std::function<double(const CollectiveTotals&)>& value) {
  w.begin(family);
  for (const RankTelemetry& r : job.ranks) {
    for (const CollectiveTotals& c : r.collectives) {
      Labels labels = rank_labels(r);
      labels.emplace_back("op", c.op);
      labels.emplace_back("backend", c.backend);
      w.sample(labels, value(c));
    }
  }
}

// One family with a sample per GPU whose value NVML could read (negative = unreadable).
void per_gpu(ExpositionWriter& w, const MetricFamily& family, const JobTelemetry& job,
             const std::function<double(const GpuTelemetry&)>& value) {
  w.begin(family);
  for (const RankTelemetry& r : job.ranks) {
    for (const GpuTelemetry& g : r.gpus) {
      const double v = value(g);
      if (v < 0) continue;
      w.sample({{"rank", std::to_string(r.rank)},
                {"host", r.host},
                {"gpu", std::to_string(g.index)},
                {"name", g.name},
                {"pci_bus_id", g.pci_bus_id}},
               v);
    }
  }
}

void single(ExpositionWriter& w, const MetricFamily& family, double value, bool present = true) {
  w.begin(family);
  if (present) w.sample({}, value);
}

double u(uint64_t v) { return static_cast<double>(v); }

}  // namespace

std::span<const MetricFamily> exported_families() { return kFamilies; }

std::string render_metrics(const JobTelemetry& job) {
  ExpositionWriter w;
  per_collective(w, kCollectiveBytes, job, [](const CollectiveTotals& c) { return u(c.bytes); });
  per_collective(w, kCollectiveOperations, job,
                 [](const CollectiveTotals& c) { return u(c.responses); });
  per_collective(w, kCollectiveTensors, job,
                 [](const CollectiveTotals& c) { return u(c.tensors); });
  per_collective(w, kCollectiveSeconds, job,
                 [](const CollectiveTotals& c) { return c.collective_seconds; });
  per_collective(w, kPackSeconds, job, [](const CollectiveTotals& c) { return c.pack_seconds; });
  per_collective(w, kUnpackSeconds, job,
                 [](const CollectiveTotals& c) { return c.unpack_seconds; });
  per_collective(w, kQueueSeconds, job, [](const CollectiveTotals& c) { return c.queue_seconds; });

  per_rank(w, kNegotiationSeconds, job,
           [](const RankTelemetry& r) { return r.negotiation_seconds; });
  per_rank(w, kWaitSeconds, job, [](const RankTelemetry& r) { return r.wait_seconds; });
  per_rank(w, kTensorsNegotiated, job,
           [](const RankTelemetry& r) { return u(r.tensors_negotiated); });
  per_rank(w, kCacheHits, job, [](const RankTelemetry& r) { return u(r.cache_hits); });
  per_rank(w, kStalls, job, [](const RankTelemetry& r) { return u(r.stalls); });
  per_rank(w, kSteps, job, [](const RankTelemetry& r) { return u(r.steps); });
  w.begin(kRankStepRate);
  for (const RankTelemetry& r : job.ranks)
    if (r.step_rate > 0) w.sample(rank_labels(r), r.step_rate);
  per_rank(w, kRankAlive, job, [](const RankTelemetry& r) { return r.alive ? 1.0 : 0.0; });
  per_rank(w, kRankJoined, job, [](const RankTelemetry& r) { return r.joined ? 1.0 : 0.0; });
  w.begin(kReportAge);
  for (const RankTelemetry& r : job.ranks)
    if (r.seconds_since_report >= 0) w.sample(rank_labels(r), r.seconds_since_report);

  per_rank(w, kRankLastSteps, job, [](const RankTelemetry& r) { return u(r.last_steps); });
  w.begin(kRankLateness);
  if (job.attributed_steps > 0) {
    for (const RankTelemetry& r : job.ranks) {
      const std::pair<const char*, double> quantiles[] = {{"0.5", r.lateness_p50_seconds},
                                                          {"0.9", r.lateness_p90_seconds},
                                                          {"0.99", r.lateness_p99_seconds}};
      for (const auto& [q, value] : quantiles) {
        Labels labels = rank_labels(r);
        labels.emplace_back("quantile", q);
        w.sample(labels, value);
      }
      w.sample(rank_labels(r), r.lateness_seconds, "_sum");
      w.sample(rank_labels(r), u(job.attributed_steps), "_count");
    }
  }
  w.begin(kRankPhaseGrowth);
  for (const RankTelemetry& r : job.ranks) {
    for (const telemetry::PhaseGrowth& g : r.phase_growth) {
      Labels labels = rank_labels(r);
      labels.emplace_back("phase", g.phase);
      w.sample(labels, g.growth());
    }
  }

  w.begin(kJobInfo);
  w.sample({{"job_id", job.job_id}}, 1);
  single(w, kWorldSize, job.world_size);
  single(w, kRanksAlive, job.ranks_alive);
  single(w, kRanksJoined, job.ranks_joined);
  single(w, kRestarts, job.restarts);
  single(w, kJobSteps, u(job.steps));
  single(w, kStepRate, job.step_rate, job.step_rate > 0);
  single(w, kAttributedSteps, u(job.attributed_steps));
  single(w, kPlans, u(job.plans));
  single(w, kFusedResponses, u(job.fused_responses));
  single(w, kFusedBytes, u(job.fused_bytes));
  single(w, kFusionThreshold, static_cast<double>(job.fusion_threshold_bytes));
  const bool fill_known = job.fused_responses > 0 && job.fusion_threshold_bytes > 0;
  single(w, kFusionFill,
         fill_known ? u(job.fused_bytes) /
                          (u(job.fused_responses) * static_cast<double>(job.fusion_threshold_bytes))
                    : 0,
         fill_known);
  single(w, kTimelineRecording, job.timeline_recording ? 1 : 0);

  per_gpu(w, kGpuUtilization, job, [](const GpuTelemetry& g) { return g.utilization_percent; });
  per_gpu(w, kGpuMemoryUsed, job,
          [](const GpuTelemetry& g) { return static_cast<double>(g.memory_used_bytes); });
  per_gpu(w, kGpuMemoryTotal, job,
          [](const GpuTelemetry& g) { return static_cast<double>(g.memory_total_bytes); });
  per_gpu(w, kGpuTemperature, job, [](const GpuTelemetry& g) { return g.temperature_celsius; });
  per_gpu(w, kGpuPower, job, [](const GpuTelemetry& g) { return g.power_watts; });
  return w.take();
}

}  // namespace hvrun::coordinator::metrics
