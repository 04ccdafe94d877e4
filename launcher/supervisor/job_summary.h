// How a job ended, and the summary hvrun prints about it: which rank caused it (launcher/
// job_verdict.h), how, what every other rank did after it, and what it last wrote to stderr.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/process/output_mux.h"

namespace hvrun::launcher {

struct WorkerRecord {
  int rank = 0;
  std::string host;
  pid_t pid = -1;  // also its process group id; -1: never started
  bool exited = false;
  int wait_status = 0;
  bool signalled_by_hvrun = false;  // hvrun signalled it before it exited
  const TaggedStream* err_stream = nullptr;
  std::string lost;  // multi-host: why its fate is unknown (its agent was lost), else empty
  // The status it is dying with, seen before it could be reaped (launcher/process/
  // dying_workers.h): an elastic job replaces it at once; -1 until then. `exited` follows.
  int dying_status = -1;
  // Set for a child that runs every rank itself (mpirun, for hvrun --mpi): messages name it
  // ("mpirun (pid 12) exited with code 1") and never blame one rank for it.
  std::string label;
};

enum class JobEndKind { kWorkerFailed, kSignal, kControlPlane, kStartFailed };

struct JobEnd {
  JobEndKind kind = JobEndKind::kWorkerFailed;
  int rank = -1;       // the rank it concerns, -1 for none
  int exit_code = 1;   // what hvrun exits with
  int signal = 0;      // kSignal: the signal hvrun received; kWorkerFailed: the worker's, or 0
  std::string message;
};

// "exited with code 3", "was killed by SIGSEGV".
std::string describe_wait_status(int wait_status);

// "SIGTERM", "SIGSEGV", ... or "signal N".
std::string signal_name(int sig);

void print_summary(OutputSink& err, const JobEnd& end, const std::vector<WorkerRecord>& workers);

}  // namespace hvrun::launcher
