// hvrun_shm_raw_bench: the shared-memory data plane alone (worker_lib/backends/shm), without the
// coordinator or the worker library's threads: the floor of hvrun's single-host CPU path, and
// the row to hold against Open MPI's shared-memory transport. Run it as a job (it reads
// HVRUN_RANK, HVRUN_SIZE, HVRUN_JOB_ID; the ranks meet through files in $TMPDIR):
//
//   hvrun -np 2 -H localhost:2 build/bin/hvrun_shm_raw_bench [--params resnet50_params.txt]
//       [--steps 20] [--warmup 3] [--latency-iters 2000] [--min-bytes 4096]
//       [--max-bytes 67108864] [--iters 10] [--chunk-kb 1024] [--json]
//
// Prints (rank 0): the nccl-tests table of float32 sum allreduce, sizes x4 from --min-bytes to
// --max-bytes (backend "shm-raw"); the latency of a 4-byte allreduce; ResNet-50's 161 gradients
// reduced one by one, as one packed buffer, and as one fused Average straight from the 161
// tensors (Backend::allreduce_pieces, hvrun's step path), and the memory floor: every rank
// rewriting its tensors once in place, all at once (steps/s; the variants take turns step by
// step); busbw at --max-bytes.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench/worker/bench_report.h"
#include "bench/worker/directory_store.h"
#include "bench/param_file.h"
#include "worker_lib/backends/shm/shm_backend.h"

namespace {

using Clock = std::chrono::steady_clock;
using hvrun::bench::ParamShape;
using hvrun::bench::read_param_file;
using hvrun::bench::Row;

struct Flags {
  std::string params = HVRUN_RESNET50_PARAMS;
  int steps = 20;
  int warmup = 3;
  int latency_iters = 2000;
  int64_t min_bytes = 4096;
  int64_t max_bytes = 64LL << 20;
  int iters = 10;
  int64_t chunk_kb = 1024;
  bool json = false;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "hvrun_shm_raw_bench: %s (see the comment at the top of shm_raw_bench.cc)\n",
               problem.c_str());
  std::exit(2);
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--params")
      f.params = value();
    else if (a == "--steps")
      f.steps = std::max(1, std::atoi(value().c_str()));
    else if (a == "--warmup")
      f.warmup = std::max(0, std::atoi(value().c_str()));
    else if (a == "--latency-iters")
      f.latency_iters = std::max(1, std::atoi(value().c_str()));
    else if (a == "--min-bytes")
      f.min_bytes = std::max<int64_t>(4, std::atoll(value().c_str()));
    else if (a == "--max-bytes")
      f.max_bytes = std::max<int64_t>(4, std::atoll(value().c_str()));
    else if (a == "--iters")
      f.iters = std::max(1, std::atoi(value().c_str()));
    else if (a == "--chunk-kb")
      f.chunk_kb = std::max<int64_t>(4, std::atoll(value().c_str()));
    else if (a == "--json")
      f.json = true;
    else
      usage("unknown flag " + a);
  }
  return f;
}

std::vector<size_t> read_param_sizes(const std::string& path) {
  auto params = read_param_file(path);
  if (!params) usage("cannot read " + path + " (pass --params PATH)");
  std::vector<size_t> sizes;
  for (const ParamShape& p : *params) sizes.push_back(static_cast<size_t>(p.elements()));
  return sizes;
}

void check(const hvrun::Status& s) {
  if (!s.is_ok()) {
    std::fprintf(stderr, "hvrun_shm_raw_bench: %s\n", s.to_string().c_str());
    std::exit(1);
  }
}

template <typename Fn>
std::vector<double> time_reps(int reps, int warmup, Fn&& fn) {
  std::vector<double> seconds;
  for (int i = 0; i < warmup + reps; ++i) {
    auto t0 = Clock::now();
    fn();
    if (i >= warmup) seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse(argc, argv);
  const char* rank_text = std::getenv("HVRUN_RANK");
  const char* size_text = std::getenv("HVRUN_SIZE");
  const char* job = std::getenv("HVRUN_JOB_ID");
  if (!rank_text || !size_text || !job)
    usage("needs HVRUN_RANK, HVRUN_SIZE, HVRUN_JOB_ID: run it under hvrun");
  const int rank = std::atoi(rank_text);
  const int size = std::atoi(size_text);
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/hvrun-shm-raw-" + job;
  hvrun::bench::DirectoryStore store(dir);
  auto made = hvrun::detail::make_shm_backend({.rank = rank,
                                               .size = size,
                                               .job_id = std::string(job) + "-raw",
                                               .host = "localhost",
                                               .chunk_bytes = static_cast<size_t>(f.chunk_kb) << 10,
                                               .connect_timeout = std::chrono::seconds(60),
                                               .timeout = std::chrono::seconds(120)},
                                              store);
  check(made.status());
  hvrun::detail::Backend& b = **made;
  check(b.barrier());
  if (rank == 0) std::filesystem::remove_all(dir);

  const size_t max_count = static_cast<size_t>(f.max_bytes / 4);
  std::vector<float> buf(std::max<size_t>(max_count, 1));
  if (rank == 0 && !f.json)
    std::printf(
        "# hvrun_shm_raw_bench: %d ranks, float32 sum, %d iterations after %d warm-ups, "
        "%lld KiB chunks\n",
        size, f.iters, f.warmup, static_cast<long long>(f.chunk_kb));
  if (rank == 0) hvrun::bench::print_header(f.json);
  int64_t total_wrong = 0;
  double last_busbw = 0;
  for (int64_t bytes = f.min_bytes; bytes <= f.max_bytes; bytes *= 4) {
    const size_t count = static_cast<size_t>(bytes / 4);
    int64_t wrong = 0;
    auto times = time_reps(f.iters, f.warmup, [&] {
      std::fill(buf.begin(), buf.begin() + static_cast<int64_t>(count), 1.0f);
      check(b.allreduce(buf.data(), count, hvrun::DataType::kFloat32, hvrun::ReduceOp::kSum));
    });
    // The fill is part of each timed call; time it alone and take it out.
    auto fill_times = time_reps(f.iters, 0, [&] {
      std::fill(buf.begin(), buf.begin() + static_cast<int64_t>(count), 1.0f);
    });
    check(b.allreduce(buf.data(), count, hvrun::DataType::kFloat32, hvrun::ReduceOp::kSum));
    for (size_t i = 0; i < count; ++i) wrong += buf[i] != static_cast<float>(size);
    total_wrong += wrong;
    Row row;
    row.backend = "shm-raw";
    row.op = "allreduce";
    row.bytes = bytes;
    row.count = static_cast<int64_t>(count);
    row.redop = "sum";
    const double fill_us = hvrun::bench::median(fill_times) * 1e6;
    row.median_us = std::max(0.01, hvrun::bench::median(times) * 1e6 - fill_us);
    row.mean_us = std::max(0.01, hvrun::bench::mean(times) * 1e6 - fill_us);
    row.wrong = wrong;
    hvrun::bench::fill_bandwidth(row, size);
    last_busbw = row.busbw;
    if (rank == 0) hvrun::bench::print_row(row, f.json);
  }
  if (rank == 0)
    hvrun::bench::print_metric(
        "shm raw allreduce busbw " + std::to_string(f.max_bytes >> 20) + " MiB", last_busbw,
        last_busbw, "GB/s", f.json);

  float one = 1.0f;
  auto latency = time_reps(f.latency_iters, 100, [&] {
    one = 1.0f;
    check(b.allreduce(&one, 1, hvrun::DataType::kFloat32, hvrun::ReduceOp::kSum));
  });
  for (double& s : latency) s *= 1e6;
  if (rank == 0)
    hvrun::bench::print_metric("shm raw latency allreduce 4 B", hvrun::bench::median(latency),
                               hvrun::bench::mean(latency), "us", f.json);

  std::vector<size_t> sizes = read_param_sizes(f.params);
  std::vector<std::vector<float>> grads;
  size_t total = 0;
  for (size_t n : sizes) {
    grads.emplace_back(n, 1.0f);
    total += n;
  }
  std::vector<float> packed(total, 1.0f);
  // The same 161 tensors as one fused Average straight from the tensors (what hvrun's plan
  // executor runs for the step): the floor of hvrun's step without the coordinator.
  std::vector<hvrun::detail::ReducePiece> pieces;
  for (auto& g : grads) pieces.push_back({g.data(), g.data(), g.size()});
  std::vector<std::byte> staging;
  const hvrun::detail::ReduceScaling average{.divisor = size};
  // The memory floor: every rank reads and rewrites each of its 161 tensors once, all ranks at
  // once (an in-place allreduce must at least do that). The scale is volatile so the pass runs.
  volatile float one_scale = 1.0f;
  // Variants take turns step by step (round robin), so a change in machine load hits all alike.
  std::vector<std::function<void()>> variants = {
      [&] {
        for (auto& g : grads)
          check(b.allreduce(g.data(), g.size(), hvrun::DataType::kFloat32, hvrun::ReduceOp::kSum));
      },
      [&] {
        check(b.allreduce(packed.data(), packed.size(), hvrun::DataType::kFloat32,
                          hvrun::ReduceOp::kSum));
      },
      [&] {
        check(b.allreduce_pieces(pieces, hvrun::DataType::kFloat32, hvrun::ReduceOp::kAverage,
                                 average, staging, nullptr));
      },
      [&] {
        const float k = one_scale;
        for (auto& g : grads)
          for (float& v : g) v *= k;
      }};
  std::vector<std::vector<double>> times(variants.size());
  for (int i = 0; i < f.warmup + f.steps; ++i)
    for (size_t v = 0; v < variants.size(); ++v) {
      check(b.barrier());  // start together: the floor's ranks must share the memory bus
      auto t0 = Clock::now();
      variants[v]();
      if (i >= f.warmup) times[v].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  const auto& per_tensor = times[0];
  const auto& packed_times = times[1];
  const auto& pieces_times = times[2];
  const auto& floor_times = times[3];
  auto rate = [](std::vector<double> s) {
    for (double& v : s) v = 1.0 / v;
    return s;
  };
  if (rank == 0) {
    auto r = rate(per_tensor);
    hvrun::bench::print_metric("shm raw step (161 allreduce one by one)", hvrun::bench::median(r),
                               hvrun::bench::mean(r), "steps/s", f.json);
    auto p = rate(packed_times);
    hvrun::bench::print_metric("shm raw packed allreduce", hvrun::bench::median(p),
                               hvrun::bench::mean(p), "steps/s", f.json);
    auto q = rate(pieces_times);
    hvrun::bench::print_metric("shm raw step fused from the tensors (161 pieces, average)",
                               hvrun::bench::median(q), hvrun::bench::mean(q), "steps/s", f.json);
    auto m = rate(floor_times);
    hvrun::bench::print_metric("memory floor (every rank rewrites its 161 tensors once)",
                               hvrun::bench::median(m), hvrun::bench::mean(m), "steps/s", f.json);
  }
  check(b.barrier());
  return total_wrong == 0 ? 0 : 1;
}
