// A job over several hosts: one `hvrun agent` per host (over the remote shell; the launch host's
// own agent directly), checked before anything starts, the network chosen from what the agents
// report and reach, then the workers started and supervised through the agents.
//
//  1. Pre-flight, within --start-timeout: every host's agent must answer HELLO with this hvrun's
//     version; each failure names the host and carries the remote shell's own message.
//  2. Interfaces: every agent lists its interfaces with a probe listener on each; every agent
//     probes the others' candidates and the launch host's; network_choice.h picks per host.
//  3. The coordinator listens on the launch host's chosen address; each rank's environment gets
//     its host's HVRUN_DATA_ADDR, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME (user NCCL_* win), the
//     forwarded environment (env_forwarding.h) and -x; the secret goes over the agent's stdin.
//  4. multi_host_runner.h runs the job.
#pragma once

#include "launcher/plan/job_plan.h"
#include "launcher/supervisor/job_summary.h"
#include "launcher/options/options.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/telemetry/telemetry_hub.h"

namespace hvrun::launcher {

// Returns hvrun's exit code. `guard` watches the agents' remote shells.
// How the job ended goes to `end` when it failed and `end` is not null.
// `telemetry` (may be null): the attempt's coordinator is attached to it while the job runs.
int run_multi_host_job(const LaunchOptions& opts, const JobPlan& plan, OrphanGuard* guard,
                       JobEnd* end = nullptr, TelemetryHub* telemetry = nullptr);

}  // namespace hvrun::launcher
