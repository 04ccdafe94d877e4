// Health checks (launcher/health/) on the job's hosts, through the path ranks take there: on
// this machine `hvrun health-check` is started directly; elsewhere through the remote shell
// (ssh, --rsh or srun) with the agents' options, so a host that hvrun cannot reach fails its
// check as it would fail to start its agent.
#pragma once

#include <chrono>
#include <string>

#include "common/settings.h"
#include "common/status.h"
#include "launcher/elastic/elastic_options.h"
#include "launcher/health/host_health.h"
#include "launcher/options/options.h"
#include "launcher/plan/job_plan.h"

namespace hvrun::launcher {

struct RemoteHealth {
  HealthOptions options;
  HealthCommand command;                 // `hvrun health-check ...` for a host
  std::chrono::milliseconds deadline{};  // the check's timeout, and the remote shell's connect
};

// `hvrun_path`: this executable, at the same path on every host (as for agents).
RemoteHealth remote_health(const Settings& settings, const std::string& hvrun_path);

// Every host of `plan` checked at once, before any rank starts. A fixed job does not start on a
// failing host: the error names each and why. An elastic job leaves them out of `options`' hosts
// when the others hold --min-np ranks (then true: plan again; -np shrinks to what is left), and
// checks them again before the discovery script's slots there. `said` gets what to tell the user
// of hosts that passed or were left out.
Result<bool> screen_hosts_at_start(const JobPlan& plan, const RemoteHealth& health,
                                   const ElasticOptions& elastic, LaunchOptions& options,
                                   std::vector<std::string>* said);

}  // namespace hvrun::launcher
