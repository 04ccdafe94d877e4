// Hand-filled JobTelemetry snapshots for the metrics and summary tests: every field set, so a
// rendering of it holds every series hvrun exports.
#pragma once

#include "coordinator/telemetry/job_telemetry.h"

namespace hvrun::test {

inline coordinator::telemetry::JobTelemetry full_sample_telemetry() {
  using namespace coordinator::telemetry;
  JobTelemetry job;
  job.job_id = "hvrun-1234abcd";
  job.world_size = 2;
  job.ranks_alive = 2;
  job.ranks_joined = 1;
  job.restarts = 1;
  job.steps = 40;
  job.step_rate = 2.5;
  job.fused_responses = 4;
  job.fused_bytes = 64 << 20;
  job.fusion_threshold_bytes = 32 << 20;
  job.plans = 100;
  job.timeline_recording = true;
  job.attributed_steps = 30;  // rank 1 arrived last in 27 of them
  for (int r = 0; r < 2; ++r) {
    RankTelemetry rank;
    rank.rank = r;
    rank.host = r == 0 ? "node-a" : "node \"b\"\\x\n";  // a host name that needs escaping
    rank.local_rank = r;
    rank.joined = r == 1;
    CollectiveTotals allreduce;
    allreduce.op = "allreduce";
    allreduce.backend = "shm";
    allreduce.tensors = 80;
    allreduce.responses = 20;
    allreduce.bytes = (r + 1) * (100ULL << 20);
    allreduce.collective_seconds = 0.5 * (r + 1);
    allreduce.pack_seconds = 0.01;
    allreduce.unpack_seconds = 0.02;
    allreduce.queue_seconds = 0.03;
    CollectiveTotals broadcast = allreduce;
    broadcast.op = "broadcast";
    broadcast.backend = "gloo";
    broadcast.bytes = 1024;
    broadcast.collective_seconds = 0.25;
    rank.collectives = {allreduce, broadcast};
    rank.negotiation_seconds = 1.5 + r;
    rank.wait_seconds = r == 0 ? 1.25 : 0.125;  // rank 0 waits for rank 1
    rank.tensors_negotiated = 100;
    rank.cache_hits = 90;
    rank.stalls = 0;
    rank.steps = 40 + static_cast<uint64_t>(r);
    rank.step_rate = r == 0 ? 3.0 : 2.5;
    GpuTelemetry gpu;
    gpu.index = 0;
    gpu.name = "NVIDIA H200";
    gpu.pci_bus_id = r == 0 ? "00000000:18:00.0" : "00000000:2A:00.0";
    gpu.utilization_percent = 87;
    gpu.memory_used_bytes = 40LL << 30;
    gpu.memory_total_bytes = 141LL << 30;
    gpu.temperature_celsius = 61;
    gpu.power_watts = r == 0 ? 450.5 : -1;  // rank 1: power unreadable
    rank.gpus = {gpu};
    rank.longest_wait_tensor = r == 0 ? "grad.layer3" : "grad.layer1";
    rank.longest_wait_seconds = r == 0 ? 0.75 : 0.01;
    rank.seconds_since_report = 0.5;
    rank.last_steps = r == 1 ? 27 : 3;
    rank.lateness_seconds = r == 1 ? 0.54 : 0.003;
    rank.lateness_p50_seconds = r == 1 ? 0.02 : 0;
    rank.lateness_p90_seconds = r == 1 ? 0.025 : 0.001;
    rank.lateness_p99_seconds = r == 1 ? 0.03 : 0.001;
    rank.last_lateness_median_seconds = r == 1 ? 0.02 : 0.001;
    if (r == 1)
      rank.phase_growth = {PhaseGrowth{"data", 0.0225, 0.0025},
                           PhaseGrowth{"forward", 0.001, 0.001}};
    job.ranks.push_back(rank);
  }
  return job;
}

}  // namespace hvrun::test
