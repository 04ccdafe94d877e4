#include "launcher/plan/rank_environment.h"

#include "common/setting_keys.h"
#include "launcher/plan/slurm_allocation.h"

extern char** environ;

namespace hvrun::launcher {
namespace {

void put(Environment& env, const std::string& key, int value) { env[key] = std::to_string(value); }

}  // namespace

NcclTuning decide_nccl(const JobPlan& plan, const std::string& nccl_p2p,
                       const Environment& inherited, const PeerAccessProbe& probe) {
  NcclTuning tuning;
  for (const auto& [key, value] : inherited) {
    if (key.rfind("NCCL_", 0) == 0)
      tuning.reasons.push_back(key + "=" + value + " (set by you, passed on unchanged)");
  }
  if (!plan.gpu_job) {
    tuning.reasons.push_back("no NCCL variable set: this is a CPU job (no GPU visible or --device cpu)");
    return tuning;
  }
  if (inherited.count("NCCL_P2P_DISABLE") != 0) {
    return tuning;  // the user's choice wins; already listed above
  }
  if (nccl_p2p == "off") {
    tuning.set["NCCL_P2P_DISABLE"] = "1";
    tuning.reasons.push_back("NCCL_P2P_DISABLE=1 (--nccl-p2p off)");
    return tuning;
  }
  if (nccl_p2p == "on") {
    tuning.reasons.push_back("NCCL_P2P_DISABLE not set (--nccl-p2p on: NCCL decides per pair)");
    return tuning;
  }
  // auto: the GPUs this host's ranks use are 0..n-1 in CUDA's numbering.
  const int used = std::min(plan.local_size, static_cast<int>(plan.gpus.visible_devices.size()));
  if (used < 2) {
    tuning.reasons.push_back("NCCL_P2P_DISABLE not set (--nccl-p2p auto: one GPU per host, no pair to check)");
    return tuning;
  }
  for (int a = 0; a < used; ++a) {
    for (int b = 0; b < used; ++b) {
      if (a == b) continue;
      std::string why;
      std::optional<bool> ok = probe.can_access_peer ? probe.can_access_peer(a, b, &why)
                                                     : std::nullopt;
      if (!ok) {
        tuning.reasons.push_back("NCCL_P2P_DISABLE not set (--nccl-p2p auto: peer access could "
                                 "not be checked: " + why + ")");
        return tuning;
      }
      if (!*ok) {
        tuning.set["NCCL_P2P_DISABLE"] = "1";
        tuning.reasons.push_back("NCCL_P2P_DISABLE=1 (--nccl-p2p auto: GPU " + std::to_string(a) +
                                 " reports no peer access to GPU " + std::to_string(b) + ")");
        return tuning;
      }
    }
  }
  tuning.reasons.push_back("NCCL_P2P_DISABLE not set (--nccl-p2p auto: all " +
                           std::to_string(used * (used - 1)) + " GPU pairs report peer access)");
  return tuning;
}

JobPlan plan_with_rank(const JobPlan& plan, int id, const std::string& host, int local_rank) {
  JobPlan grown = plan;
  while (static_cast<int>(grown.ranks.size()) <= id)
    grown.ranks.push_back(RankSlot{static_cast<int>(grown.ranks.size()), host, local_rank, 0, 0});
  grown.ranks[static_cast<size_t>(id)] = RankSlot{id, host, local_rank, 0, 0};
  return grown;
}

Environment rank_environment(const JobPlan& plan, int rank, const JobIdentity& job,
                             const Settings& settings, const NcclTuning& nccl,
                             const Environment& inherited) {
  Environment env = inherited;
  std::erase_if(env, [](const auto& kv) { return describes_slurm_task(kv.first); });
  // Every non-default setting travels as its HVRUN_* variable, so workers see the job's config.
  for (const auto& [key, value] : settings.non_default_environment()) env[key] = value;

  const RankSlot& slot = plan.ranks.at(static_cast<size_t>(rank));
  const int cross_rank = slot.cross_rank, cross_size = plan.cross_size;
  const int local_size = slot.local_size > 0 ? slot.local_size : plan.local_size;
  put(env, "HVRUN_RANK", rank);
  put(env, "HVRUN_SIZE", plan.size);
  put(env, "HVRUN_LOCAL_RANK", slot.local_rank);
  put(env, "HVRUN_LOCAL_SIZE", local_size);
  put(env, "HVRUN_CROSS_RANK", cross_rank);
  put(env, "HVRUN_CROSS_SIZE", cross_size);
  env["HVRUN_HOST"] = slot.host;
  env["HVRUN_COORDINATOR_ADDR"] = job.coordinator_address;
  env["HVRUN_SECRET"] = job.secret;
  env["HVRUN_JOB_ID"] = job.job_id;
  env["HVRUN_DATA_ADDR"] = job.data_address;

  // Names other launchers set, for trainers ported from torchrun and Horovod.
  put(env, "RANK", rank);
  put(env, "WORLD_SIZE", plan.size);
  put(env, "LOCAL_RANK", slot.local_rank);
  put(env, "LOCAL_WORLD_SIZE", local_size);
  put(env, "HOROVOD_RANK", rank);
  put(env, "HOROVOD_SIZE", plan.size);
  put(env, "HOROVOD_LOCAL_RANK", slot.local_rank);
  put(env, "HOROVOD_LOCAL_SIZE", local_size);
  put(env, "HOROVOD_CROSS_RANK", cross_rank);
  put(env, "HOROVOD_CROSS_SIZE", cross_size);

  if (plan.gpu_job && settings.get(setting::kGpuPinning) == "visible-devices") {
    // Local rank k sees only its GPU (k-th entry of the user's list when they gave one).
    // On other hosts of a multi-host job there may be more GPUs than this host shows: the
    // plain ordinal there.
    const auto k = static_cast<size_t>(slot.local_rank);
    env["CUDA_VISIBLE_DEVICES"] = k < plan.gpus.visible_devices.size()
                                      ? plan.gpus.visible_devices[k]
                                      : std::to_string(slot.local_rank);
  }
  for (const auto& [key, value] : nccl.set) env[key] = value;
  return env;
}

std::vector<std::pair<std::string, std::string>> describe_additions(const Environment& env,
                                                                    const Environment& inherited) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : env) {
    auto it = inherited.find(key);
    if (it != inherited.end() && it->second == value) continue;
    out.emplace_back(key, key == "HVRUN_SECRET" ? "<hidden>" : value);
  }
  return out;
}

Environment current_process_environment() {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> to_envp(const Environment& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [key, value] : env) out.push_back(key + "=" + value);
  return out;
}

}  // namespace hvrun::launcher
