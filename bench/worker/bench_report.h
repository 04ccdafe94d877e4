// Timing statistics and the nccl-tests table shared by hvrun's worker benchmarks.
//
// Columns follow NVIDIA/nccl-tests (src/common.cu): size in bytes, element count, type, reduce
// op, time per call (median and mean over the timed iterations, in microseconds), algbw
// (bytes / median time, GB/s), busbw (algbw x the collective's bus factor: allreduce 2(n-1)/n,
// allgather (n-1)/n, broadcast 1) and #wrong (elements that differed from the expected value).
// Rows carry the backend ("hvrun" through the whole stack, "raw" Gloo alone) so one table holds
// both, and hvrun rows carry busbw(hvrun) / busbw(raw) of the same size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hvrun::bench {

double median(std::vector<double> values);
double mean(const std::vector<double>& values);

// The collective's bus factor for `ranks` ranks (nccl-tests' PERFORMANCE.md).
double bus_factor(const std::string& op, int ranks);

struct Row {
  std::string backend;  // "hvrun" or "raw"
  std::string op;       // "allreduce", "allgather", "broadcast"
  int64_t bytes = 0;    // per-rank result size
  int64_t count = 0;    // elements
  std::string type = "float";
  std::string redop = "none";
  double median_us = 0;
  double mean_us = 0;
  double algbw = 0;  // GB/s, from the median
  double busbw = 0;
  int64_t wrong = 0;
  double ratio = 0;  // hvrun busbw / raw busbw of the same size; 0 = none
};

// Fills algbw and busbw from bytes and median_us.
void fill_bandwidth(Row& row, int ranks);

// Text table (nccl-tests style) or, with json, one JSON object per line.
void print_header(bool json);
void print_row(const Row& row, bool json);

// Lone label/value lines (steps/s, latency) in both formats, so scripts can parse them.
void print_metric(const std::string& name, double median, double mean, const std::string& unit,
                  bool json, const std::string& note = "");

}  // namespace hvrun::bench
