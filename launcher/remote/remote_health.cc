#include "launcher/remote/remote_health.h"

#include <cstdlib>
#include <filesystem>

#include "launcher/remote/remote_shell.h"

namespace hvrun::launcher {

namespace {
// Beyond the check's own timeout: the remote shell's start and hvrun's, on a loaded host.
constexpr std::chrono::milliseconds kCommandMargin{5000};
}  // namespace

RemoteHealth remote_health(const Settings& settings, const std::string& hvrun_path) {
  std::error_code ec;
  RemoteHealth health;
  health.options = health_options(settings, std::filesystem::current_path(ec).string());
  const RemoteShellOptions rsh =
      RemoteShellOptions::from_settings(settings, std::getenv("SLURM_JOB_ID") != nullptr);
  health.deadline = health.options.timeout + kCommandMargin +
                    std::chrono::milliseconds(static_cast<int64_t>(rsh.connect_timeout_s * 1000));
  health.command = [rsh, hvrun_path, options = health.options,
                    local = LocalHostNames::of_this_machine()](const std::string& host, int slots) {
    std::vector<std::string> words = {"health-check"};
    for (std::string& a : health_check_arguments(HostCheckRequest{options, slots}))
      words.push_back(std::move(a));
    // Under srun every host is reached as a step of the allocation, as its agent is.
    if (!rsh.srun && local.is_local(host)) {
      words.insert(words.begin(), hvrun_path);
      return words;
    }
    return remote_hvrun_command(rsh, host, hvrun_path, words);
  };
  return health;
}

Status check_plan_hosts(const JobPlan& plan, const RemoteHealth& health,
                        std::vector<std::string>* notes) {
  std::vector<HostToCheck> hosts;
  for (const HostSlots& h : plan.hosts) hosts.push_back({h.host, h.slots});
  if (hosts.empty()) hosts.push_back({"localhost", plan.size});  // a job planned on this host
  const std::vector<HealthVerdict> verdicts = check_hosts(hosts, health.command, health.deadline);
  std::string failed;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (verdicts[i].healthy) {
      for (const std::string& note : verdicts[i].notes)
        if (notes) notes->push_back("host " + hosts[i].host + ": " + note);
      continue;
    }
    failed += (failed.empty() ? "" : "; ") + std::string("host ") + hosts[i].host + ": " +
              verdicts[i].reason;
  }
  if (failed.empty()) return Status::ok();
  return failed_precondition("health check failed before any rank started: " + failed +
                             ". Mend each host named or leave it out of the job's hosts");
}

}  // namespace hvrun::launcher
