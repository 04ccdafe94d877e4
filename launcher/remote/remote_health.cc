#include "launcher/remote/remote_health.h"

#include <algorithm>
#include <cstdlib>
#include <map>
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

Result<bool> screen_hosts_at_start(const JobPlan& plan, const RemoteHealth& health,
                                   const ElasticOptions& elastic, LaunchOptions& options,
                                   std::vector<std::string>* said) {
  std::vector<HostToCheck> hosts;
  for (const HostSlots& h : plan.hosts) hosts.push_back({h.host, h.slots});
  if (hosts.empty()) hosts.push_back({"localhost", plan.size});  // a job planned on this host
  const std::vector<HealthVerdict> verdicts = check_hosts(hosts, health.command, health.deadline);
  std::string failed;
  std::map<std::string, std::string> unhealthy;  // host -> why
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (verdicts[i].healthy) {
      for (const std::string& note : verdicts[i].notes)
        said->push_back("host " + hosts[i].host + ": " + note);
      continue;
    }
    unhealthy[hosts[i].host] = verdicts[i].reason;
    failed += (failed.empty() ? "" : "; ") + std::string("host ") + hosts[i].host + ": " +
              verdicts[i].reason;
  }
  if (failed.empty()) return false;
  const std::string refused = "health check failed before any rank started: " + failed;
  if (!elastic.enabled || options.hosts.empty())
    return failed_precondition(refused +
                               ". Mend each host named or leave it out of the job's hosts");
  // An elastic job goes on with what is left, as it would after losing those hosts.
  std::vector<HostSlots> kept;
  int slots = 0;
  for (const HostSlots& h : options.hosts) {
    if (unhealthy.count(h.host) > 0) continue;
    kept.push_back(h);
    slots += h.slots;
  }
  const int np = std::min(plan.size, slots);
  if (np < elastic.min_np)
    return failed_precondition(refused + "; the other hosts have " + std::to_string(slots) +
                               " slots, fewer than --min-np " + std::to_string(elastic.min_np) +
                               ". Mend each host named or leave it out of the job's hosts");
  options.hosts = std::move(kept);
  options.num_proc = np;
  for (const auto& [host, why] : unhealthy)
    said->push_back("host " + host + " is left out of the elastic job: " + why + "; it starts on " +
                    std::to_string(np) +
                    " ranks, and the host is checked again before the "
                    "discovery script's slots there get ranks");
  return true;
}

}  // namespace hvrun::launcher
