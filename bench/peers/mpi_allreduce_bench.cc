// bench_peer_mpi: Open MPI's MPI_Allreduce on the gradient step bench/compare measures hvrun
// against. Run under mpirun:
//
//   mpirun -np 2 build/bin/bench_peer_mpi [--params resnet50_params.txt] [--steps 20]
//       [--warmup 3] [--latency-iters 500]
//
// Prints one JSON object per line (the format of bench/worker/bench_report.h's metrics):
// steps/s for the 161 tensors allreduced one by one (MPI_SUM in place, then divided by the
// size, as Average), for one packed allreduce of the same bytes, and the latency of a 4-byte
// MPI_Allreduce in us. Plain C++ and MPI only, so it builds wherever Open MPI is installed.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "bench/param_file.h"

#ifndef HVRUN_RESNET50_PARAMS
#define HVRUN_RESNET50_PARAMS "bench/data/resnet50_params.txt"
#endif

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

void metric(const char* name, const std::vector<double>& values, const char* unit) {
  std::printf("{\"kind\":\"metric\",\"name\":\"%s\",\"median\":%.4f,\"mean\":%.4f,"
              "\"unit\":\"%s\",\"note\":\"\"}\n",
              name, median(values), mean(values), unit);
  std::fflush(stdout);
}

void average(std::vector<float>& data, int size) {
  float inv = 1.0f / static_cast<float>(size);
  for (float& v : data) v *= inv;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string params = HVRUN_RESNET50_PARAMS;
  int steps = 20, warmup = 3, latency_iters = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--params") params = argv[i + 1];
    else if (a == "--steps") steps = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--warmup") warmup = std::max(0, std::atoi(argv[i + 1]));
    else if (a == "--latency-iters") latency_iters = std::max(1, std::atoi(argv[i + 1]));
  }
  auto shapes = hvrun::bench::read_param_file(params);
  if (!shapes) {
    std::fprintf(stderr, "bench_peer_mpi: cannot read %s (pass --params PATH)\n", params.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::vector<std::vector<float>> tensors;
  size_t total = 0;
  for (const hvrun::bench::ParamShape& p : *shapes) {
    const auto elements = static_cast<size_t>(p.elements());
    tensors.emplace_back(elements, 1.0f);
    total += elements;
  }
  std::vector<float> packed(total, 1.0f);

  auto time_reps = [&](int reps, int warm, auto&& body) {
    std::vector<double> seconds;
    for (int i = 0; i < warm + reps; ++i) {
      auto start = std::chrono::steady_clock::now();
      body();
      if (i >= warm)
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return seconds;
  };
  auto rates = [](std::vector<double> seconds) {
    for (double& s : seconds) s = 1.0 / s;
    return seconds;
  };

  auto per_tensor = time_reps(steps, warmup, [&] {
    for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
      MPI_Allreduce(MPI_IN_PLACE, it->data(), static_cast<int>(it->size()), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      average(*it, size);
    }
  });
  auto whole = time_reps(steps, warmup, [&] {
    MPI_Allreduce(MPI_IN_PLACE, packed.data(), static_cast<int>(packed.size()), MPI_FLOAT,
                  MPI_SUM, MPI_COMM_WORLD);
    average(packed, size);
  });
  float one = 1.0f;
  auto latency = time_reps(latency_iters, 20, [&] {
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  for (double& s : latency) s *= 1e6;
  // 64 MiB float32 sum: bus bandwidth as nccl-tests defines it (bytes x 2(n-1)/n / time).
  std::vector<float> big(16u << 20, 1.0f);
  auto big_times = time_reps(std::max(3, steps / 2), 1, [&] {
    MPI_Allreduce(MPI_IN_PLACE, big.data(), static_cast<int>(big.size()), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  });
  for (double& s : big_times)
    s = static_cast<double>(big.size() * 4) * 2.0 * (size - 1) / size / s / 1e9;
  if (rank == 0) {
    metric("mpi step (161 MPI_Allreduce one by one)", rates(per_tensor), "steps/s");
    metric("mpi packed MPI_Allreduce", rates(whole), "steps/s");
    metric("mpi latency allreduce 4 B", latency, "us");
    metric("mpi allreduce busbw 64 MiB", big_times, "GB/s");
  }
  MPI_Finalize();
  return 0;
}
