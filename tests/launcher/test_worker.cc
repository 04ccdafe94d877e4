// A worker for the launcher's control-plane tests, through the real worker library:
//   launcher_test_worker barrier         init, barrier, exit 0
//   launcher_test_worker abort RANK      RANK aborts the job after init; the others wait in a barrier
//   launcher_test_worker report RANK     RANK aborts the job with its own failure, as a trainer's
//                                        uncaught exception does, then exits 1 once its barrier
//                                        failed too; the others' barrier fails: they exit 1
//   launcher_test_worker crash RANK      RANK kills itself (SIGKILL) after init; the others wait
//   launcher_test_worker exit RANK CODE  RANK exits with CODE after init, saying nothing to the
//                                        coordinator; the others' barrier fails: they exit 1
//   launcher_test_worker stop RANK       RANK stops itself (SIGSTOP) after init; the others wait
//                                        in a barrier until the heartbeat timeout aborts the job
//   launcher_test_worker early RANK      RANK exits 0 before init; the others init
//   launcher_test_worker register-only   rank 0 registers, every other rank sleeps (start timeout)
//   launcher_test_worker socket-mode     after init, prints the modes of the coordinator's unix
//                                        socket and of its directory ("socket 600 dir 700")
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "hvrun/hvrun.h"

namespace {

// "socket 600 dir 700" for the coordinator's unix socket, or why it cannot tell.
int print_socket_modes() {
  const char* address = std::getenv("HVRUN_COORDINATOR_ADDR");
  const std::string text = address != nullptr ? address : "";
  if (text.rfind("unix:", 0) != 0) return std::printf("not a unix socket: %s\n", text.c_str()), 1;
  const std::string path = text.substr(5);
  const std::string dir = path.substr(0, path.rfind('/'));
  struct stat socket_stat {}, dir_stat {};
  if (::stat(path.c_str(), &socket_stat) != 0 || ::stat(dir.c_str(), &dir_stat) != 0)
    return std::printf("cannot stat %s\n", path.c_str()), 1;
  std::printf("socket %o dir %o\n", socket_stat.st_mode & 07777, dir_stat.st_mode & 07777);
  return 0;
}

}  // namespace

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
  if (mode == "early" && env_rank == chosen) return 0;
  auto worker = hvrun::Worker::init();
  if (!worker.is_ok()) {
    std::fprintf(stderr, "init failed: %s\n", worker.status().message().c_str());
    return 1;
  }
  const int rank = (*worker)->rank();
  if (mode == "socket-mode") {
    const int code = print_socket_modes();
    return (*worker)->shutdown().is_ok() ? code : 1;
  }
  if (mode == "abort" && rank == chosen) {
    (*worker)->abort("rank " + std::to_string(rank) + " gave up");
    ::pause();
  }
  if (mode == "report" && rank == chosen)
    (*worker)->abort("rank " + std::to_string(rank) + " failed: ValueError: boom");
  if (mode == "crash" && rank == chosen) ::raise(SIGKILL);
  if (mode == "exit" && rank == chosen) std::_Exit(argc > 3 ? std::atoi(argv[3]) : 1);
  if (mode == "stop" && rank == chosen) ::raise(SIGSTOP);
  if (hvrun::Status s = (*worker)->barrier(); !s.is_ok()) {
    std::fprintf(stderr, "barrier failed: %s\n", s.message().c_str());
    return 1;
  }
  if (mode != "barrier") ::pause();  // the others are already gone: hvrun must end this one
  std::printf("rank %d passed the barrier\n", rank);
  return (*worker)->shutdown().is_ok() ? 0 : 1;
}
