// A worker for the launcher's control-plane tests, through the real worker library:
//   launcher_test_worker barrier         init, barrier, exit 0
//   launcher_test_worker abort RANK      RANK aborts the job after init; the others wait in a barrier
//   launcher_test_worker crash RANK      RANK kills itself (SIGKILL) after init; the others wait
//   launcher_test_worker register-only   rank 0 registers, every other rank sleeps (start timeout)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "hvrun/hvrun.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  const int chosen = argc > 2 ? std::atoi(argv[2]) : -1;
  const char* rank_env = std::getenv("HVRUN_RANK");
  const int env_rank = rank_env != nullptr ? std::atoi(rank_env) : 0;
  if (mode == "register-only" && env_rank != 0) {
    ::pause();  // never registers; hvrun must end this
    return 0;
  }
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init failed: %s\n", worker.status().message().c_str());
    return 1;
  }
  const int rank = (*worker)->rank();
  if (mode == "abort" && rank == chosen) {
    (*worker)->abort("rank " + std::to_string(rank) + " gave up");
    ::pause();
  }
  if (mode == "crash" && rank == chosen) ::raise(SIGKILL);
  if (hvrun::Status s = (*worker)->barrier(); !s.is_ok()) {
    std::fprintf(stderr, "barrier failed: %s\n", s.message().c_str());
    return 1;
  }
  if (mode != "barrier") ::pause();  // the others are already gone: hvrun must end this one
  std::printf("rank %d passed the barrier\n", rank);
  return (*worker)->shutdown().is_ok() ? 0 : 1;
}
