// Runs the workers of one job on this host and decides how the job ends.
//
// One Boost.Asio io_context on the calling thread owns everything: the workers' output pipes,
// SIGCHLD/SIGINT/SIGTERM, the grace-period timer and events from the control plane (posted from
// the coordinator's threads through post_control_plane_failure / post_note, which are the only
// thread-safe members).
//
// How a job ends:
//  - every worker exits 0: hvrun exits 0 (a worker exiting 0 early is not a failure, unless the
//    coordinator fails the job for it: a rank that never registered);
//  - the first worker to exit non-zero or by a signal, a control-plane failure (registration
//    timeout, abort, lost worker) or SIGINT/SIGTERM to hvrun starts the teardown: the job is
//    aborted on the coordinator, every worker's process group gets SIGTERM (the forwarded signal
//    for SIGINT/SIGTERM) and SIGCONT, then SIGKILL after the grace period; hvrun exits with the
//    failed worker's code (128+signal for a signal), 128+signal for a forwarded signal, 1 for a
//    control-plane failure, 2 when a worker could not be started, and prints a summary.
//  - the failure it reports is the first cause (launcher/supervisor/job_verdict.h): a rank's exit that
//    followed the coordinator's abort is a consequence; the rank the abort names is the cause.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/supervisor/job_summary.h"
#include "launcher/supervisor/job_verdict.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/process/output_mux.h"

namespace hvrun::launcher {

struct WorkerLaunch {
  int rank = 0;
  std::string host;
  std::vector<std::string> envp;  // "KEY=VALUE"
};

struct JobRunnerConfig {
  std::string command_path;       // resolved executable
  std::vector<std::string> argv;  // argv[0] as the user typed it
  std::chrono::milliseconds grace_period{5000};
  std::string output_dir;  // --output-filename; empty: no files
  bool tag_output = true;
  bool verbose = false;
  CoordinatorHooks coordinator;  // the job's coordinator (empty members: none)
};

class JobRunner {
 public:
  JobRunner(JobRunnerConfig config, OutputSink& out, OutputSink& err, OrphanGuard* guard);
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Starts `workers` and runs until the job is over; returns hvrun's exit code. Call on the
  // thread that lives as long as the job (the workers' PR_SET_PDEATHSIG is tied to it).
  int run(const std::vector<WorkerLaunch>& workers);

  // After run(): how the job ended (none when it succeeded).
  std::optional<JobEnd> end() const;

  // Thread-safe: the control plane failed (message for the user; rank it concerns or -1).
  void post_control_plane_failure(std::string message, int rank);
  // Thread-safe: a line worth printing with --verbose.
  void post_note(std::string message);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};


}  // namespace hvrun::launcher
