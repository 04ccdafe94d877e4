// bench_coordinator_service: negotiation round trips through the real gRPC service (in-process
// server, N ranks as threads with their own streams, loopback TCP or a unix socket).
//
//   bench_coordinator_service [--ranks 2,4,8] [--steps 200] [--unix] [--cycle-time-ms 1]
//                             [--params PATH]
//
// Per step every rank submits, then waits for the plan that completes its step. Two workloads:
//   lone:     one 4-byte allreduce per step (cached after the first step): shows that a lone
//             tensor is answered without waiting for the cycle time;
//   resnet50: ResNet-50's 161 gradients per step as packed cache ids.
// Prints the median and 90th percentile step time seen by rank 0 (wall clock).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/coordinator/step_requests.h"
#include "bench/param_file.h"
#include "coordinator/service/coordinator_server.h"
#include "hvrun.grpc.pb.h"

#ifndef HVRUN_RESNET50_PARAMS
#define HVRUN_RESNET50_PARAMS "bench/data/resnet50_params.txt"
#endif

namespace {

namespace v1 = hvrun::v1;
using Clock = std::chrono::steady_clock;
constexpr char kSecret[] = "bench-secret";

using Tensor = hvrun::bench::ParamShape;

std::vector<Tensor> read_params(const std::string& path) {
  return hvrun::bench::read_param_file(path).value_or(std::vector<Tensor>{});
}

void fail(const std::string& what) {
  std::cerr << "bench_coordinator_service: " << what << "\n";
  std::exit(1);
}

// One rank: registers, negotiates `steps` steps of `tensors`, returns its step times (µs).
std::vector<double> run_rank(const std::string& address, int rank, const std::vector<Tensor>& tensors,
                             int steps) {
  auto stub = v1::Coordinator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto context = [] {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("x-hvrun-secret", kSecret);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    return ctx;
  };
  v1::RegisterRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.mutable_worker()->set_host("localhost");
  request.mutable_worker()->set_requested_rank(rank);
  request.mutable_worker()->set_pid(getpid());
  v1::RegisterResponse registered;
  auto reg_ctx = context();
  if (!stub->Register(reg_ctx.get(), request, &registered).ok()) fail("Register failed");
  auto stream_ctx = context();
  auto stream = stub->Negotiate(stream_ctx.get());
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(rank);
  v1::CoordinatorMessage in;
  if (!stream->Write(hello) || !stream->Read(&in) || !in.has_welcome()) fail("no Welcome");

  std::map<std::string, uint32_t> ids;
  std::vector<double> times;
  for (int step = 0; step < steps; ++step) {
    const v1::WorkerMessage out = hvrun::bench::step_requests(tensors, ids);
    const auto start = Clock::now();
    if (!stream->Write(out)) fail("write failed");
    size_t done = 0;
    while (done < tensors.size()) {
      if (!stream->Read(&in) || !in.has_plan()) fail("stream ended");
      for (const auto& response : in.plan().responses()) {
        if (!response.error().empty()) fail(response.error());
        for (const auto& t : response.tensors()) {
          ids[t.name()] = t.cache_id();
          ++done;
        }
      }
    }
    times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  v1::WorkerMessage bye;
  bye.mutable_goodbye();
  stream->Write(bye);
  stream->WritesDone();
  while (stream->Read(&in)) {
  }
  stream->Finish();
  return times;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> rank_counts = {2, 4, 8};
  int steps = 200;
  bool unix_socket = false;
  double cycle_ms = 1.0;
  std::string params_path = HVRUN_RESNET50_PARAMS;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : (fail(arg + " needs a value"), ""); };
    if (arg == "--ranks") {
      rank_counts.clear();
      std::stringstream parts(value());
      std::string item;
      while (std::getline(parts, item, ',')) rank_counts.push_back(std::stoi(item));
    } else if (arg == "--steps") {
      steps = std::max(2, std::stoi(value()));
    } else if (arg == "--unix") {
      unix_socket = true;
    } else if (arg == "--cycle-time-ms") {
      cycle_ms = std::stod(value());
    } else if (arg == "--params") {
      params_path = value();
    } else {
      fail("usage: bench_coordinator_service [--ranks 2,4,8] [--steps N] [--unix] "
           "[--cycle-time-ms MS] [--params PATH]");
    }
  }
  const auto resnet = read_params(params_path);
  if (resnet.empty()) fail("cannot read " + params_path + " (pass --params PATH)");
  const std::vector<std::pair<std::string, std::vector<Tensor>>> workloads = {
      {"lone", {{"tiny", {1}}}}, {"resnet50", resnet}};

  std::printf("# coordinator service round trips (%s, cycle time %.3g ms), wall time per step "
              "seen by rank 0, %d steps (first excluded)\n",
              unix_socket ? "unix socket" : "loopback TCP", cycle_ms, steps);
  std::printf("%10s %6s %9s %12s %12s\n", "workload", "ranks", "tensors", "median_us", "p90_us");
  for (const auto& [workload, tensors] : workloads) {
    for (int ranks : rank_counts) {
      hvrun::coordinator::CoordinatorOptions options;
      options.world_size = ranks;
      options.secret = kSecret;
      options.cycle_time = std::chrono::microseconds(static_cast<int64_t>(cycle_ms * 1000));
      if (unix_socket) {
        options.listen_address = "unix:/tmp/hvrun-bench-" + std::to_string(getpid()) + ".sock";
      }
      auto server = hvrun::coordinator::CoordinatorServer::start(options);
      if (!server.is_ok()) fail(server.status().to_string());
      std::vector<std::vector<double>> times(ranks);
      std::vector<std::thread> threads;
      for (int r = 0; r < ranks; ++r) {
        threads.emplace_back([&, r] { times[r] = run_rank((*server)->address(), r, tensors, steps); });
      }
      for (auto& t : threads) t.join();
      (*server)->shutdown();
      if (unix_socket) ::unlink(options.listen_address.c_str() + 5);
      std::vector<double> steady(times[0].begin() + 1, times[0].end());
      std::printf("%10s %6d %9zu %12.1f %12.1f\n", workload.c_str(), ranks, tensors.size(),
                  percentile(steady, 0.5), percentile(steady, 0.9));
    }
  }
  return 0;
}
