// Runs an elastic job's workers on this host (docs/elastic.md) under hvrun's supervisor: the
// same processes, output and teardown as a single-host job (supervisor/job_runner.h), except
// that a rank's failure ends only the membership (membership.h decides the next one, the
// coordinator is told through `hooks`). Short of --min-np ranks the job waits up to
// --elastic-timeout, then fails naming what was lost. New slots never come here: a job with a
// --host-discovery-script starts its ranks through agents (attempt/placement_choice.h), so that
// a discovered host's ranks start on that host.
//
// Threads: run() on the thread that lives as long as the job; everything else on the
// supervisor's loop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/elastic/elastic_controller.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/supervisor/supervised_job.h"

namespace hvrun::launcher {

class LocalWorkers;

struct ElasticRunnerConfig : SupervisedJobConfig {
  std::string command_path;       // resolved executable
  std::vector<std::string> argv;  // argv[0] as the user typed it
  ElasticOptions elastic;
  // The environment of process `id` started in `slot` ("KEY=VALUE"); `spare`: a hot spare.
  std::function<std::vector<std::string>(int id, const ElasticSlot& slot, bool spare)> environment;
  ElasticHooks hooks;
};

class ElasticRunner : public SupervisedJob {
 public:
  ElasticRunner(ElasticRunnerConfig config, OutputSink& out, OutputSink& err, OrphanGuard* guard);
  ~ElasticRunner();

  // Starts the first membership (`first`: -np slots, ids 0..n-1), then --spares spares in the
  // next local ranks of the first slot's host, and runs until the job is over; returns hvrun's
  // exit code. `config.elastic` has no discovery script.
  int run(const std::vector<ElasticSlot>& first);

 private:
  class HeldChildren;

  // A new process in `slot`: its id, or -1 (said why).
  int start_member(const ElasticSlot& slot, bool spare);

  ElasticRunnerConfig config_;
  OrphanGuard* guard_;
  LocalWorkers* local_ = nullptr;
  HeldChildren* children_ = nullptr;
  std::unique_ptr<ElasticController> controller_;  // while run() runs
};

}  // namespace hvrun::launcher
