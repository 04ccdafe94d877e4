// A training-like worker for the metrics tests, through the real worker library: every rank
// allreduces a 1 MiB gradient and a small flag, and marks a step, until the flag says some rank
// saw STOPFILE (so every rank leaves after the same step), or LIMIT seconds passed.
//   metrics_test_worker STOPFILE [LIMIT_SECONDS [fail-first-attempt]]
// fail-first-attempt: on hvrun's first attempt (HVRUN_RESTART_COUNT 0) rank 1 exits with code 3
// after its first step, so that --max-restarts starts the job again.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string stop_file = argv[1];
  const double limit_s = argc > 2 ? std::atof(argv[2]) : 25.0;
  const char* attempt = std::getenv("HVRUN_RESTART_COUNT");
  const bool fail_now = argc > 3 && std::string(argv[3]) == "fail-first-attempt" &&
                        (attempt == nullptr || std::atoi(attempt) == 0);
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init failed: %s\n", worker.status().message().c_str());
    return 1;
  }
  std::vector<float> gradient(256 * 1024, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  for (long step = 0;; ++step) {
    if (hvrun::Status s = (*worker)->allreduce(
            "grad.weights", hvrun::TensorView{gradient.data(),
                                              hvrun::DataType::kFloat32,
                                              {static_cast<int64_t>(gradient.size())}});
        !s.is_ok()) {
      std::fprintf(stderr, "allreduce failed: %s\n", s.message().c_str());
      return 1;
    }
    const bool out_of_time =
        std::chrono::steady_clock::now() - start > std::chrono::duration<double>(limit_s);
    std::vector<float> stop{::access(stop_file.c_str(), F_OK) == 0 || out_of_time ? 1.0f : 0.0f};
    if (hvrun::Status s = (*worker)->allreduce(
            "stop.flag", hvrun::TensorView{stop.data(), hvrun::DataType::kFloat32, {1}});
        !s.is_ok()) {
      std::fprintf(stderr, "allreduce failed: %s\n", s.message().c_str());
      return 1;
    }
    (*worker)->mark_step();
    if (fail_now && (*worker)->rank() == 1) {
      std::fprintf(stderr, "rank 1 fails on the first attempt (as asked)\n");
      std::_Exit(3);
    }
    if (stop[0] > 0) {
      std::printf("rank %d stopped after %ld steps\n", (*worker)->rank(), step + 1);
      break;
    }
  }
  return (*worker)->shutdown().is_ok() ? 0 : 1;
}
