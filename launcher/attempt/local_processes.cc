#include "launcher/attempt/local_processes.h"

#include "launcher/attempt/attempt.h"
#include "launcher/elastic/elastic_runner.h"
#include "launcher/plan/gpu_probe.h"
#include "launcher/supervisor/job_runner.h"

namespace hvrun::launcher {
namespace {

void print_verbose_plan(Attempt& attempt, const std::string& coordinator_address,
                        const std::vector<Environment>& envs) {
  const JobPlan& plan = attempt.plan();
  std::string text = "hvrun: job " + attempt.job_id() + ": " + std::to_string(plan.size) +
                     " rank" + (plan.size == 1 ? "" : "s") + " on " + plan.ranks.at(0).host +
                     ", " + (plan.gpu_job ? "GPU job (" + plan.gpus.source + ")" : "CPU job") +
                     ", coordinator " + coordinator_address + "\n";
  for (const std::string& reason : attempt.nccl().reasons) text += "hvrun: NCCL: " + reason + "\n";
  for (size_t r = 0; r < envs.size(); ++r)
    text += Attempt::environment_line(static_cast<int>(r), envs[r], attempt.session());
  attempt.err().write_message(text);
}

}  // namespace

LocalProcesses::LocalProcesses(std::string command_path) : command_path_(std::move(command_path)) {}
LocalProcesses::~LocalProcesses() = default;

PeerAccessProbe LocalProcesses::peer_access_probe() const { return driver_peer_access_probe(); }

int LocalProcesses::run(Attempt& attempt) {
  const JobPlan& plan = attempt.plan();
  JobRunnerConfig config;
  static_cast<SupervisedJobConfig&>(config) = attempt.runner_config();
  config.command_path = command_path_;
  config.argv = attempt.options().command;
  if (attempt.elastic().enabled) {
    // A lost rank ends only the membership (launcher/elastic/).
    ElasticRunnerConfig ec;
    static_cast<SupervisedJobConfig&>(ec) = config;
    ec.command_path = config.command_path;
    ec.argv = config.argv;
    ec.elastic = attempt.elastic();
    // Membership ranks renumber at each reset: the launch-time rank of an exit means nothing to
    // a later membership, and the membership change says what was lost.
    ec.coordinator.worker_exited = nullptr;
    ec.environment = [this, &attempt](int id, const ElasticSlot& slot, bool spare) {
      return to_envp(attempt.member_environment(id, slot, spare, identity_, attempt.nccl(),
                                                attempt.launch_environment()));
    };
    ec.hooks = attempt.elastic_hooks();
    elastic_ = std::make_unique<ElasticRunner>(std::move(ec), attempt.out(), attempt.err(),
                                               &attempt.guard());
    attempt.supervise(*elastic_);
  } else {
    plain_ = std::make_unique<JobRunner>(std::move(config), attempt.out(), attempt.err(),
                                         &attempt.guard());
    attempt.supervise(*plain_);
  }

  auto address = attempt.start_coordinator_for_this_host("");
  if (!address.is_ok()) return attempt.coordinator_failed(address.status());
  identity_ = attempt.identity(*address);
  std::vector<WorkerLaunch> launches;
  std::vector<Environment> envs;
  for (const RankSlot& slot : plan.ranks) {
    envs.push_back(attempt.rank_environment(slot.rank, identity_, attempt.nccl(),
                                            attempt.launch_environment()));
    launches.push_back(WorkerLaunch{slot.rank, slot.host, to_envp(envs.back())});
  }
  if (attempt.verbose()) print_verbose_plan(attempt, *address, envs);

  if (!elastic_) return plain_->run(launches);
  std::vector<ElasticSlot> first;
  for (const RankSlot& slot : plan.ranks) first.push_back({slot.host, slot.local_rank});
  return elastic_->run(first);
}

}  // namespace hvrun::launcher
