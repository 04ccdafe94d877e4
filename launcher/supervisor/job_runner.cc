#include "launcher/supervisor/job_runner.h"

#include <spdlog/spdlog.h>

#include "launcher/plan/cpu_binding.h"
#include "launcher/supervisor/job_supervisor.h"
#include "launcher/supervisor/local_workers.h"
#include "launcher/supervisor/rank_streams.h"

namespace hvrun::launcher {

JobRunner::JobRunner(JobRunnerConfig config, OutputSink& out, OutputSink& err, OrphanGuard* guard)
    : SupervisedJob(config, out, err), config_(std::move(config)), guard_(guard) {}

int JobRunner::run(const std::vector<WorkerLaunch>& launches) {
  if (!make_output_dir()) return 2;
  // Sized once: the pipes and the summary hold references into it.
  std::vector<WorkerRecord>& workers = supervisor().workers();
  workers.resize(launches.size());
  for (size_t i = 0; i < launches.size(); ++i) {
    workers[i].rank = launches[i].rank;
    workers[i].host = launches[i].host;
    workers[i].label = launches[i].label;
  }
  LocalWorkers local(supervisor().io(), workers, streams(), supervisor(), guard_,
                     config_.grace_period);
  return supervisor().run(local, [&] { start_all(local, launches); });
}

void JobRunner::start_all(LocalWorkers& local, const std::vector<WorkerLaunch>& launches) {
  for (size_t i = 0; i < launches.size(); ++i) {
    const std::vector<int> cpus = binding_for_worker(launches[i].envp);
    Status started = local.start(i, config_.command_path, config_.argv, launches[i].envp, cpus);
    if (!started.is_ok()) {
      supervisor().start_failed(JobEnd{JobEndKind::kStartFailed, launches[i].rank, 2, 0,
                                       "rank " + std::to_string(launches[i].rank) +
                                           " could not be started: " + started.message()});
      break;
    }
    if (!cpus.empty())
      spdlog::debug("rank {} bound to CPUs {}", launches[i].rank, cpu_list_text(cpus));
  }
  spdlog::debug("{} workers started", launches.size());
}

}  // namespace hvrun::launcher
