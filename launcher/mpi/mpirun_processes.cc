#include "launcher/mpi/mpirun_processes.h"

#include "launcher/attempt/attempt.h"
#include "launcher/supervisor/job_runner.h"

namespace hvrun::launcher {

MpirunProcesses::MpirunProcesses(MpiHandoff handoff) : handoff_(std::move(handoff)) {}
MpirunProcesses::~MpirunProcesses() = default;

int MpirunProcesses::run(Attempt& attempt) {
  JobRunnerConfig config;
  static_cast<SupervisedJobConfig&>(config) = attempt.runner_config();
  config.command_path = handoff_.mpirun_path;
  config.argv = handoff_.argv;
  config.tag_output = false;  // mpirun tags its ranks' lines itself (--tag-output)
  config.coordinator.worker_exited = nullptr;
  runner_ = std::make_unique<JobRunner>(std::move(config), attempt.out(), attempt.err(),
                                        &attempt.guard());
  attempt.supervise(*runner_);

  // Ranks on other hosts reach the coordinator over TCP on the interface named.
  auto address = attempt.start_coordinator_for_this_host(handoff_.listen_on);
  if (!address.is_ok()) return attempt.coordinator_failed(address.status());
  // mpirun exports these to every rank by name (MpiHandoff::argv).
  const JobIdentity identity = attempt.identity(*address);
  Environment env = attempt.launch_environment();
  for (const auto& [key, value] : attempt.settings().non_default_environment()) env[key] = value;
  for (const auto& [key, value] : handoff_.network) env[key] = value;
  env["HVRUN_COORDINATOR_ADDR"] = identity.coordinator_address;
  env["HVRUN_SECRET"] = identity.secret;
  env["HVRUN_JOB_ID"] = identity.job_id;
  if (attempt.verbose()) {
    std::string line = "hvrun: --mpi:";
    for (const std::string& word : handoff_.argv) line += " " + word;
    attempt.err().write_message(line + "\n");
  }
  return runner_->run({WorkerLaunch{0, "localhost", to_envp(env), "mpirun"}});
}

}  // namespace hvrun::launcher
