// Runs the workers of one job on this host (local_workers.h) under hvrun's supervisor
// (job_supervisor.h, which says how a job ends), with their output rank-tagged onto hvrun's
// stdout and stderr (rank_streams.h).
//
// Threads: run() on the thread that lives as long as the job; post_* are thread-safe (the
// coordinator's threads call them).
#pragma once

#include <string>
#include <vector>

#include "launcher/process/orphan_guard.h"
#include "launcher/process/output_mux.h"
#include "launcher/supervisor/supervised_job.h"

namespace hvrun::launcher {

class LocalWorkers;

struct WorkerLaunch {
  int rank = 0;
  std::string host;
  std::vector<std::string> envp;  // "KEY=VALUE"
  std::string label;              // WorkerRecord::label (mpirun)
};

struct JobRunnerConfig : SupervisedJobConfig {
  std::string command_path;       // resolved executable
  std::vector<std::string> argv;  // argv[0] as the user typed it
};

class JobRunner : public SupervisedJob {
 public:
  JobRunner(JobRunnerConfig config, OutputSink& out, OutputSink& err, OrphanGuard* guard);

  // Starts `workers` and runs until the job is over; returns hvrun's exit code. Call on the
  // thread that lives as long as the job (the workers' PR_SET_PDEATHSIG is tied to it).
  int run(const std::vector<WorkerLaunch>& workers);

 private:
  void start_all(LocalWorkers& local, const std::vector<WorkerLaunch>& launches);

  JobRunnerConfig config_;
  OrphanGuard* guard_;
};

}  // namespace hvrun::launcher
