// hvrun_worker_bench: times collectives through the whole worker library (API, negotiation with
// the coordinator, fusion buffer, Gloo data plane). Run it as a job:
//
//   hvrun -np 2 -H localhost:2 build/bin/hvrun_worker_bench [--op allreduce|allgather|
//       broadcast|alltoall] [--min-bytes B] [--max-bytes B] [--iters N] [--warmup N] [--json]
//
// Rank 0 prints the nccl-tests table: size, count, type, redop, time (us per call), algbw
// (size / time), busbw (algbw x the collective's bus factor: allreduce 2(n-1)/n, allgather and
// alltoall (n-1)/n, broadcast 1), wrong (elements that differed from the expected value).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"

namespace {

struct Flags {
  std::string op = "allreduce";
  int64_t min_bytes = 8;
  int64_t max_bytes = 64LL << 20;
  int iters = 20;
  int warmup = 3;
  bool json = false;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--op") f.op = value();
    else if (a == "--min-bytes") f.min_bytes = std::atoll(value().c_str());
    else if (a == "--max-bytes") f.max_bytes = std::atoll(value().c_str());
    else if (a == "--iters") f.iters = std::atoi(value().c_str());
    else if (a == "--warmup") f.warmup = std::atoi(value().c_str());
    else if (a == "--json") f.json = true;
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      std::exit(2);
    }
  }
  return f;
}

double bus_factor(const std::string& op, int n) {
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "broadcast") return 1.0;
  return static_cast<double>(n - 1) / n;
}

// Runs one call of `op` on `count` floats per rank; with `verify`, returns the number of wrong
// elements (verification is kept out of the timed loop).
int64_t run_once(hvrun::Worker& w, const std::string& op, std::vector<float>& buf, int64_t count,
                 bool verify) {
  hvrun::TensorView v{buf.data(), hvrun::DataType::kFloat32, {count}};
  int n = w.size();
  int64_t wrong = 0;
  if (op == "allreduce") {
    std::fill(buf.begin(), buf.begin() + count, 1.0f);
    if (!w.allreduce("bench", v).is_ok()) return count;
    if (!verify) return 0;
    for (int64_t i = 0; i < count; ++i) wrong += buf[i] != static_cast<float>(n);
  } else if (op == "broadcast") {
    std::fill(buf.begin(), buf.begin() + count, static_cast<float>(w.rank()));
    if (!w.broadcast("bench", v, 0).is_ok()) return count;
    if (!verify) return 0;
    for (int64_t i = 0; i < count; ++i) wrong += buf[i] != 0.0f;
  } else if (op == "allgather") {
    int64_t rows = count / n;
    std::fill(buf.begin(), buf.begin() + rows, static_cast<float>(w.rank()));
    auto out = w.allgather("bench", hvrun::ConstTensorView(buf.data(), hvrun::DataType::kFloat32, {rows}));
    if (!out.is_ok()) return count;
    if (!verify) return 0;
    const float* o = reinterpret_cast<const float*>(out->bytes.data());
    for (int64_t i = 0; i < rows * n; ++i) wrong += o[i] != static_cast<float>(i / rows);
  } else {
    int64_t rows = count / n * n;
    std::fill(buf.begin(), buf.begin() + rows, static_cast<float>(w.rank()));
    auto out = w.alltoall("bench", hvrun::ConstTensorView(buf.data(), hvrun::DataType::kFloat32, {rows}));
    if (!out.is_ok()) return count;
    if (!verify) return 0;
    const float* o = reinterpret_cast<const float*>(out->bytes.data());
    for (int64_t i = 0; i < rows; ++i) wrong += o[i] != static_cast<float>(i / (rows / n));
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse(argc, argv);
  auto init = hvrun::Worker::init();
  if (!init.is_ok()) {
    std::fprintf(stderr, "init: %s\n", init.status().to_string().c_str());
    return 1;
  }
  hvrun::Worker& w = **init;
  std::vector<float> buf(static_cast<size_t>(f.max_bytes / 4) + 1);
  if (w.rank() == 0 && !f.json)
    std::printf("# hvrun worker bench: %s, %d ranks, float32, %d iters\n"
                "%12s %12s %8s %6s %12s %10s %10s %8s\n",
                f.op.c_str(), w.size(), f.iters, "size(B)", "count", "type", "redop", "time(us)",
                "algbw", "busbw", "wrong");
  if (w.rank() == 0 && f.json) std::printf("[");
  bool first = true;
  int64_t total_wrong = 0;
  for (int64_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 4) {
    int64_t count = std::max<int64_t>(bytes / 4, w.size());
    int64_t wrong = 0;
    for (int i = 0; i < f.warmup; ++i) wrong += run_once(w, f.op, buf, count, true);
    (void)w.barrier();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < f.iters; ++i) wrong += run_once(w, f.op, buf, count, false);
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / f.iters;
    total_wrong += wrong;
    double algbw = static_cast<double>(count * 4) / us / 1e3;  // GB/s
    double busbw = algbw * bus_factor(f.op, w.size());
    if (w.rank() != 0) continue;
    if (f.json) {
      std::printf("%s{\"size\":%lld,\"count\":%lld,\"type\":\"float\",\"op\":\"%s\",\"time_us\":%.2f,"
                  "\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld}",
                  first ? "" : ",", static_cast<long long>(count * 4), static_cast<long long>(count),
                  f.op.c_str(), us, algbw, busbw, static_cast<long long>(wrong));
    } else {
      std::printf("%12lld %12lld %8s %6s %12.2f %10.4f %10.4f %8lld\n",
                  static_cast<long long>(count * 4), static_cast<long long>(count), "float",
                  f.op == "allreduce" ? "sum" : "none", us, algbw, busbw, static_cast<long long>(wrong));
    }
    first = false;
    std::fflush(stdout);
  }
  if (w.rank() == 0 && f.json) std::printf("]\n");
  (void)w.shutdown();
  return total_wrong == 0 ? 0 : 1;
}
