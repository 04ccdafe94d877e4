// Health checks (launcher/health/) on the job's hosts, through the path ranks take there: on
// this machine `hvrun health-check` is started directly; elsewhere through the remote shell
// (ssh, --rsh or srun) with the agents' options, so a host that hvrun cannot reach fails its
// check as it would fail to start its agent.
#pragma once

#include <chrono>
#include <string>

#include "common/settings.h"
#include "common/status.h"
#include "launcher/health/host_health.h"
#include "launcher/plan/job_plan.h"

namespace hvrun::launcher {

struct RemoteHealth {
  HealthOptions options;
  HealthCommand command;                // `hvrun health-check ...` for a host
  std::chrono::milliseconds deadline{};  // the check's timeout, and the remote shell's connect
};

// `hvrun_path`: this executable, at the same path on every host (as for agents).
RemoteHealth remote_health(const Settings& settings, const std::string& hvrun_path);

// Every host of `plan` checked at once, before any rank starts. An error names each host that
// failed and why (the job must not start); `notes` gets what a healthy host said.
Status check_plan_hosts(const JobPlan& plan, const RemoteHealth& health,
                        std::vector<std::string>* notes);

}  // namespace hvrun::launcher
