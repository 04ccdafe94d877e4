// Runs a worker job for a test: a real coordinator in this process (CoordinatorServer on
// 127.0.0.1:0) and N worker processes started with the environment hvrun sets, each bounded by
// a timeout and killed (by process group) when it passes. Nothing outlives run_job().
#pragma once

#include <chrono>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace hvrun::test {

struct JobOptions {
  std::chrono::milliseconds timeout{90000};
  std::map<std::string, std::string> extra_env;
  int64_t fusion_threshold_bytes = 128LL << 20;
  // Coordinator settings the fault and join tests vary.
  bool join_average_all = false;
  std::chrono::milliseconds heartbeat_timeout{30000};
  std::chrono::microseconds cycle_time{1000};
};

struct JobResult {
  bool coordinator_started = false;
  std::string coordinator_error;
  std::vector<RunResult> ranks;
  // Per rank: collectives that ran on the fast path, and their payload bytes (the coordinator's
  // telemetry at the end, backend "<cpu backend>-fast": "shm-fast", "hierarchical-fast", "gloo-fast").
  std::vector<uint64_t> fast_path_collectives;
  std::vector<uint64_t> fast_path_bytes;
  // The coordinator's own count: per rank, the tensors it negotiated (planned) for that rank;
  // and the plans it sent.
  std::vector<uint64_t> tensors_negotiated;
  uint64_t plans = 0;

  bool all_succeeded() const;
  // Whether every rank (or each of `ranks`) has `text` in its stdout; false without ranks.
  bool printed(const std::string& text) const;
  bool printed(const std::string& text, std::initializer_list<int> ranks) const;
  // Every rank's exit code, stdout and stderr, for assertion messages.
  std::string describe() const;
};

JobResult run_job(int np, const std::vector<std::string>& argv, const JobOptions& options = {});

}  // namespace hvrun::test
