// A trainer with named phases for the straggler tests, through the real worker library's C++ API:
// each step marks "data" (2 ms of sleep; SLOW_MS more on rank SLOW_RANK), "forward" (1 ms) and
// "backward" (a blocking 256 KiB allreduce and a 4-byte stop flag, which the fast path runs
// without the coordinator once negotiated), then mark_step(). It stops after STEPS steps, or
// earlier once some rank sees STOPFILE (the flag makes every rank leave after the same step).
//   straggler_worker SLOW_RANK SLOW_MS STEPS [STOPFILE]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const int slow_rank = std::atoi(argv[1]);
  const int slow_ms = std::atoi(argv[2]);
  const long steps = std::atol(argv[3]);
  const std::string stop_file = argc > 4 ? argv[4] : "";
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init failed: %s\n", worker.status().message().c_str());
    return 1;
  }
  hvrun::Worker& w = **worker;
  std::vector<float> gradient(64 * 1024, 1.0f);
  long step = 0;
  for (; step < steps; ++step) {
    w.mark_phase("data");
    std::this_thread::sleep_for(
        std::chrono::milliseconds(2 + (w.rank() == slow_rank ? slow_ms : 0)));
    w.mark_phase("forward");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    w.mark_phase("backward");
    if (hvrun::Status s =
            w.allreduce("grad", hvrun::TensorView{gradient.data(),
                                                  hvrun::DataType::kFloat32,
                                                  {static_cast<int64_t>(gradient.size())}});
        !s.is_ok()) {
      std::fprintf(stderr, "allreduce failed: %s\n", s.message().c_str());
      return 1;
    }
    float stop = !stop_file.empty() && ::access(stop_file.c_str(), F_OK) == 0 ? 1.0f : 0.0f;
    if (hvrun::Status s =
            w.allreduce("stop", hvrun::TensorView{&stop, hvrun::DataType::kFloat32, {1}});
        !s.is_ok()) {
      std::fprintf(stderr, "allreduce failed: %s\n", s.message().c_str());
      return 1;
    }
    w.mark_step();
    if (stop > 0) {
      ++step;
      break;
    }
  }
  std::printf("rank %d stopped after %ld steps\n", w.rank(), step);
  return w.shutdown().is_ok() ? 0 : 1;
}
