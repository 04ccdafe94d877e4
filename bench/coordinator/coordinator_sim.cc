// bench_coordinator_sim: the coordinator's CPU cost per training step, with N simulated ranks
// each submitting ResNet-50's 161 gradients to the pure negotiation engine (no gRPC, one core).
//
//   bench_coordinator_sim [--params PATH] [--ranks 2,64,1024] [--steps 11] [--repeats 5]
//                         [--batches 1] [--json]
//
// "first" is a step with full requests (names, shapes): median over --repeats fresh engines.
// "steady" is a step where every tensor is cached and each rank sends only packed cache ids:
// median over --steps - 1 steps. CPU time is this thread's (CLOCK_THREAD_CPUTIME_ID) across
// every rank's submit() and the take_plan() calls, i.e. what the negotiation loop would spend.
// Request bytes are the serialized RequestBatch of one rank for one step; plan bytes and
// responses are those of one steady step (all its plans).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/param_file.h"
#include "coordinator/engine/negotiation_engine.h"

#ifndef HVRUN_RESNET50_PARAMS
#define HVRUN_RESNET50_PARAMS "bench/data/resnet50_params.txt"
#endif

namespace {

using hvrun::coordinator::EngineOptions;
using hvrun::coordinator::NegotiationEngine;
namespace v1 = hvrun::v1;

struct Param {
  std::string name;
  std::vector<int64_t> shape;
};

std::vector<Param> read_params(const std::string& path) {
  auto shapes = hvrun::bench::read_param_file(path);
  if (!shapes) {
    std::cerr << "bench_coordinator_sim: cannot read " << path << " (pass --params PATH)\n";
    std::exit(2);
  }
  std::vector<Param> params;
  for (const hvrun::bench::ParamShape& p : *shapes) params.push_back({p.name, p.shape});
  return params;
}

double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
  int ranks;
  double first_ms;
  double steady_ms;
  size_t first_bytes;
  size_t steady_bytes;
  size_t plan_bytes;
  int responses;
};

// What a step's plans held (outside the timed part).
struct StepPlans {
  std::map<std::string, uint32_t> ids;  // cache id of every tensor
  size_t bytes = 0;                     // serialized plans
  int responses = 0;
};

// One step: every rank submits its batches (round robin over ranks per batch), then the plan.
// Returns the CPU time; checks every tensor ran exactly once.
double run_step(NegotiationEngine& engine, int ranks, const std::vector<v1::RequestBatch>& batches,
                size_t tensors, NegotiationEngine::TimePoint now, StepPlans* info) {
  std::vector<v1::Plan> plans;
  const double start = thread_cpu_ms();
  for (const auto& batch : batches) {
    for (int r = 0; r < ranks; ++r) {
      auto status = engine.submit(r, batch, now);
      if (!status.is_ok()) {
        std::cerr << status.to_string() << "\n";
        std::exit(1);
      }
      while (auto plan = engine.take_plan(now)) plans.push_back(std::move(*plan));
    }
  }
  const double elapsed = thread_cpu_ms() - start;
  size_t ran = 0;
  *info = StepPlans{};
  for (const auto& plan : plans) {
    info->bytes += plan.ByteSizeLong();
    info->responses += plan.responses_size();
    for (const auto& response : plan.responses()) {
      if (!response.error().empty()) {
        std::cerr << "unexpected error: " << response.error() << "\n";
        std::exit(1);
      }
      ran += response.tensors_size();
      for (const auto& t : response.tensors()) info->ids[t.name()] = t.cache_id();
    }
  }
  if (ran != tensors) {
    std::cerr << "step ran " << ran << " tensors, expected " << tensors << "\n";
    std::exit(1);
  }
  return elapsed;
}

// Splits one rank's requests (in backprop order: last layer first) into `count` batches.
std::vector<v1::RequestBatch> split(const v1::RequestBatch& all, int count, bool ids_only) {
  std::vector<v1::RequestBatch> out(count);
  const int n = ids_only ? all.cached_ids_size() : all.requests_size();
  for (int i = 0; i < n; ++i) {
    auto& batch = out[static_cast<size_t>(i) * count / n];
    if (ids_only) {
      batch.add_cached_ids(all.cached_ids(i));
    } else {
      *batch.add_requests() = all.requests(i);
    }
  }
  return out;
}

Row measure(const std::vector<Param>& params, int ranks, int steps, int repeats, int batches) {
  EngineOptions options;
  options.world_size = ranks;
  const auto now = NegotiationEngine::Clock::now();

  v1::RequestBatch full;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    auto& request = *full.add_requests();
    request.set_name(it->name);
    request.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
    request.set_dtype(v1::DATA_TYPE_FLOAT32);
    request.set_device(v1::DEVICE_KIND_CUDA);
    request.set_reduce_op(v1::REDUCE_OP_AVERAGE);
    for (int64_t d : it->shape) request.add_shape(d);
  }
  const auto full_batches = split(full, batches, false);

  Row row{ranks, 0, 0, full.ByteSizeLong(), 0, 0, 0};
  std::vector<double> first_times;
  std::vector<double> steady_times;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    NegotiationEngine engine(options);
    StepPlans plans;
    first_times.push_back(run_step(engine, ranks, full_batches, params.size(), now, &plans));
    if (repeat > 0) continue;
    // The ids the plans assigned, in the order this rank submits.
    v1::RequestBatch steady;
    for (const auto& request : full.requests()) steady.add_cached_ids(plans.ids.at(request.name()));
    row.steady_bytes = steady.ByteSizeLong();
    const auto steady_batches = split(steady, batches, true);
    for (int step = 1; step < steps; ++step) {
      steady_times.push_back(run_step(engine, ranks, steady_batches, params.size(), now, &plans));
    }
    row.plan_bytes = plans.bytes;
    row.responses = plans.responses;
  }
  row.first_ms = median(first_times);
  row.steady_ms = median(steady_times);
  return row;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream parts(text);
  std::string item;
  while (std::getline(parts, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string params_path = HVRUN_RESNET50_PARAMS;
  std::vector<int> rank_counts = {2, 64, 1024};
  int steps = 11;
  int repeats = 5;
  int batches = 1;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--params") params_path = value();
    else if (arg == "--ranks") rank_counts = parse_list(value());
    else if (arg == "--steps") steps = std::max(2, std::stoi(value()));
    else if (arg == "--repeats") repeats = std::max(1, std::stoi(value()));
    else if (arg == "--batches") batches = std::max(1, std::stoi(value()));
    else if (arg == "--json") json = true;
    else {
      std::cerr << "usage: bench_coordinator_sim [--params PATH] [--ranks 2,64,1024] [--steps N] "
                   "[--repeats N] [--batches N] [--json]\n";
      return 2;
    }
  }
  const auto params = read_params(params_path);
  std::vector<Row> rows;
  for (int ranks : rank_counts) rows.push_back(measure(params, ranks, steps, repeats, batches));

  if (json) {
    std::cout << "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf("%s{\"ranks\": %d, \"tensors\": %zu, \"first_step_cpu_ms\": %.4f, "
                  "\"steady_step_cpu_ms\": %.4f, \"first_request_bytes_per_rank\": %zu, "
                  "\"steady_request_bytes_per_rank\": %zu, \"plan_bytes_per_step\": %zu, "
                  "\"responses_per_step\": %d}",
                  i ? ", " : "", r.ranks, params.size(), r.first_ms, r.steady_ms, r.first_bytes,
                  r.steady_bytes, r.plan_bytes, r.responses);
    }
    std::cout << "]\n";
    return 0;
  }
  std::printf("# coordinator negotiation engine, ResNet-50 (%zu gradients, fp32), one core\n",
              params.size());
  std::printf("# first: full requests (median of %d fresh engines); steady: cached ids only "
              "(median of %d steps); %d batch(es) per rank per step\n",
              repeats, steps - 1, batches);
  std::printf("%8s %14s %15s %16s %14s %15s %11s %10s\n", "ranks", "first_ms", "steady_ms",
              "steady_us/rank", "first_req_B", "steady_req_B", "plan_B", "responses");
  for (const Row& r : rows) {
    std::printf("%8d %14.3f %15.3f %16.3f %14zu %15zu %11zu %10d\n", r.ranks, r.first_ms,
                r.steady_ms, r.steady_ms * 1000.0 / r.ranks, r.first_bytes, r.steady_bytes,
                r.plan_bytes, r.responses);
  }
  return 0;
}
