// The environment each worker starts with: hvrun's own environment, plus the job's identity
// (HVRUN_RANK ..., the coordinator's address, the job secret), the names trainers already read
// (RANK, WORLD_SIZE, HOROVOD_RANK, ...), GPU pinning and NCCL tuning.
// docs/launcher.md lists it all.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/settings.h"
#include "launcher/plan/gpu_probe.h"
#include "launcher/plan/job_plan.h"

namespace hvrun::launcher {

using Environment = std::map<std::string, std::string>;

// What is the same for every rank of the job.
struct JobIdentity {
  std::string coordinator_address;  // "127.0.0.1:40123"
  std::string secret;               // only ever in the environment (HVRUN_SECRET)
  std::string job_id;
  std::string data_address = "127.0.0.1";  // where Gloo binds on this host
};

// NCCL variables hvrun adds for every worker of this host, and why (for --verbose).
struct NcclTuning {
  Environment set;                  // variables hvrun sets
  std::vector<std::string> reasons;  // one line per NCCL variable decided or kept
};

// `nccl_p2p` is the setting: auto|on|off. Variables in `inherited` named NCCL_* always win.
NcclTuning decide_nccl(const JobPlan& plan, const std::string& nccl_p2p,
                       const Environment& inherited, const PeerAccessProbe& probe);

// `plan` with rank `id` in `host`'s slot `local_rank`, the ranks between filled alike: an
// elastic job's later processes, which the launch plan does not have.
JobPlan plan_with_rank(const JobPlan& plan, int id, const std::string& host, int local_rank);

// The full environment of `rank`.
Environment rank_environment(const JobPlan& plan, int rank, const JobIdentity& job,
                             const Settings& settings, const NcclTuning& nccl,
                             const Environment& inherited);

// What hvrun adds or changes for `rank` relative to `inherited` (for --verbose), secret masked.
std::vector<std::pair<std::string, std::string>> describe_additions(const Environment& env,
                                                                    const Environment& inherited);

Environment current_process_environment();

// "KEY=VALUE" strings, as execve wants them.
std::vector<std::string> to_envp(const Environment& env);

}  // namespace hvrun::launcher
