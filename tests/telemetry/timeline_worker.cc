// A worker for the telemetry tests, through the real worker library. Each step: four fused
// gradient allreduces, an allgather and a broadcast, then hvrun::mark_step().
//   timeline_worker STEPS                       STEPS steps, barrier, exit 0
//   timeline_worker STEPS --start PATH          rank 0 starts the timeline at run time first
//   timeline_worker STEPS --start PATH --stop K rank 0 stops it after step K
//   timeline_worker forever                     steps until killed (prints "step N" lines)
//   ... --late-rank R --late-ms M               rank R submits step 0 M ms late (a stall)
//   ... --crash-rank R --crash-step K           rank R SIGKILLs itself after step K (first
//                                               attempt only: HVRUN_RESTART_COUNT unset or 0)
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"

namespace {

bool ok(const hvrun::Status& s, const char* what, int rank) {
  if (s.is_ok()) return true;
  std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, s.to_string().c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const bool forever = std::strcmp(argv[1], "forever") == 0;
  const long steps = forever ? -1 : std::atol(argv[1]);
  std::string start_path;
  long stop_after = -1;
  int crash_rank = -1;
  int late_rank = -1;
  long late_ms = 0;
  long crash_step = -1;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--start") == 0) start_path = argv[i + 1];
    if (std::strcmp(argv[i], "--stop") == 0) stop_after = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--crash-rank") == 0) crash_rank = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--crash-step") == 0) crash_step = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--late-rank") == 0) late_rank = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--late-ms") == 0) late_ms = std::atol(argv[i + 1]);
  }
  auto init = hvrun::Worker::init();
  if (!init.is_ok()) {
    std::fprintf(stderr, "init failed: %s\n", init.status().message().c_str());
    return 1;
  }
  hvrun::Worker& w = **init;
  const int rank = w.rank();
  if (!start_path.empty() && rank == 0 && !ok(w.start_timeline(start_path), "start_timeline", rank))
    return 1;
  // Every rank waits until rank 0's request reached the coordinator (it was sent before the
  // barrier's request on the same stream), so recording is on for the steps below.
  if (!ok(w.barrier(), "barrier", rank)) return 1;

  const char* names[] = {"grad.w1", "grad.b1", "grad.w2", "grad.b2"};
  std::vector<std::vector<float>> grads(4, std::vector<float>(2048, 1.0f));
  std::vector<float> mine(16, static_cast<float>(rank));
  std::vector<float> weights(256, static_cast<float>(rank));
  for (long step = 0; forever || step < steps; ++step) {
    // The stimulus of the stall test: the other ranks wait for this one at step 0.
    if (step == 0 && rank == late_rank) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    std::vector<hvrun::Handle> handles;
    for (int t = 0; t < 4; ++t)
      handles.push_back(w.allreduce_async(
          names[t], hvrun::TensorView{grads[t].data(), hvrun::DataType::kFloat32,
                                      {static_cast<int64_t>(grads[t].size())}},
          {.op = hvrun::ReduceOp::kAverage}));
    for (auto& h : handles)
      if (!ok(w.wait(h), "allreduce", rank)) return 1;
    auto gathered = w.allgather("gather", hvrun::ConstTensorView{mine.data(), hvrun::DataType::kFloat32, {4, 4}});
    if (!ok(gathered.status(), "allgather", rank)) return 1;
    if (!ok(w.broadcast("weights", hvrun::TensorView{weights.data(), hvrun::DataType::kFloat32, {256}}, 0),
            "broadcast", rank))
      return 1;
    w.mark_step();
    if (stop_after >= 0 && step + 1 == stop_after && rank == 0 &&
        !ok(w.stop_timeline(), "stop_timeline", rank))
      return 1;
    const char* attempt = std::getenv("HVRUN_RESTART_COUNT");
    if (rank == crash_rank && step == crash_step && (!attempt || std::atoi(attempt) == 0))
      std::raise(SIGKILL);
    if (forever && step < 1000) {
      std::printf("step %ld\n", step);
      std::fflush(stdout);
    }
  }
  if (!ok(w.barrier(), "final barrier", rank)) return 1;
  std::printf("rank %d done\n", rank);
  return w.shutdown().is_ok() ? 0 : 1;
}
