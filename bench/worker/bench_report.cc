#include "bench/worker/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace hvrun::bench {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double bus_factor(const std::string& op, int ranks) {
  if (ranks <= 1) return 1.0;
  if (op == "allreduce") return 2.0 * (ranks - 1) / ranks;
  if (op == "broadcast") return 1.0;
  return static_cast<double>(ranks - 1) / ranks;  // allgather, alltoall
}

void fill_bandwidth(Row& row, int ranks) {
  row.algbw = row.median_us > 0 ? static_cast<double>(row.bytes) / row.median_us / 1e3 : 0;
  row.busbw = row.algbw * bus_factor(row.op, ranks);
}

void print_header(bool json) {
  if (json) return;
  std::printf("%-6s %12s %11s %6s %-10s %5s %11s %11s %9s %9s %7s %8s\n", "#", "size(B)", "count",
              "type", "op", "redop", "median(us)", "mean(us)", "algbw", "busbw", "#wrong",
              "vs raw");
  std::printf("%-6s %12s %11s %6s %-10s %5s %11s %11s %9s %9s %7s %8s\n", "#", "", "", "", "",
              "", "", "", "(GB/s)", "(GB/s)", "", "(busbw)");
}

void print_row(const Row& row, bool json) {
  if (json) {
    std::printf("{\"kind\":\"collective\",\"backend\":\"%s\",\"op\":\"%s\",\"size\":%lld,"
                "\"count\":%lld,\"type\":\"%s\",\"redop\":\"%s\",\"median_us\":%.3f,"
                "\"mean_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld,\"ratio\":%.4f}\n",
                row.backend.c_str(), row.op.c_str(), static_cast<long long>(row.bytes),
                static_cast<long long>(row.count), row.type.c_str(), row.redop.c_str(),
                row.median_us, row.mean_us, row.algbw, row.busbw,
                static_cast<long long>(row.wrong), row.ratio);
  } else {
    char ratio[16] = "";
    if (row.ratio > 0) std::snprintf(ratio, sizeof ratio, "%.3fx", row.ratio);
    std::printf("%-6s %12lld %11lld %6s %-10s %5s %11.2f %11.2f %9.3f %9.3f %7lld %8s\n",
                row.backend.c_str(), static_cast<long long>(row.bytes),
                static_cast<long long>(row.count), row.type.c_str(), row.op.c_str(),
                row.redop.c_str(), row.median_us, row.mean_us, row.algbw, row.busbw,
                static_cast<long long>(row.wrong), ratio);
  }
  std::fflush(stdout);
}

void print_metric(const std::string& name, double median_value, double mean_value,
                  const std::string& unit, bool json, const std::string& note) {
  if (json) {
    std::printf("{\"kind\":\"metric\",\"name\":\"%s\",\"median\":%.4f,\"mean\":%.4f,"
                "\"unit\":\"%s\",\"note\":\"%s\"}\n",
                name.c_str(), median_value, mean_value, unit.c_str(), note.c_str());
  } else {
    std::printf("%-40s median %12.3f  mean %12.3f  %-8s %s\n", name.c_str(), median_value,
                mean_value, unit.c_str(), note.c_str());
  }
  std::fflush(stdout);
}

}  // namespace hvrun::bench
