// One rank of the launch benchmark: join the job through the worker library, pass one barrier
// with every other rank, leave cleanly. What a trainer does before its first step.
// With --timing, prints how long each phase took (to stderr), to see where launch time goes.
#include <chrono>
#include <cstdio>
#include <cstring>

#include "hvrun/hvrun.h"

namespace {

using Clock = std::chrono::steady_clock;

void report(bool on, const char* phase, Clock::time_point since) {
  if (!on) return;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - since).count();
  std::fprintf(stderr, "%s %.1f ms\n", phase, static_cast<double>(us) / 1000.0);
}

}  // namespace

int main(int argc, char** argv) {
  const bool timing = argc > 1 && std::strcmp(argv[1], "--timing") == 0;
  auto t0 = Clock::now();
  auto worker = hvrun::Worker::init();
  report(timing, "init", t0);
  if (!worker.is_ok()) {
    std::fprintf(stderr, "bench_launch_worker: init failed: %s\n",
                 worker.status().message().c_str());
    return 1;
  }
  auto t1 = Clock::now();
  if (hvrun::Status s = (*worker)->barrier(); !s.is_ok()) {
    std::fprintf(stderr, "bench_launch_worker: barrier failed: %s\n", s.message().c_str());
    return 1;
  }
  report(timing, "barrier", t1);
  auto t2 = Clock::now();
  if (hvrun::Status s = (*worker)->shutdown(); !s.is_ok()) {
    std::fprintf(stderr, "bench_launch_worker: shutdown failed: %s\n", s.message().c_str());
    return 1;
  }
  report(timing, "shutdown", t2);
  auto t3 = Clock::now();
  worker->reset();  // what a trainer's exit does anyway; timed apart from shutdown
  report(timing, "destroy", t3);
  return 0;
}
