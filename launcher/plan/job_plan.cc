#include "launcher/plan/job_plan.h"

#include <unistd.h>

#include <algorithm>
#include <climits>

namespace hvrun::launcher {

bool LocalHostNames::is_local(const std::string& host) const {
  if (host.rfind("127.", 0) == 0 || host == "::1") return true;
  return std::find(names.begin(), names.end(), host) != names.end();
}

LocalHostNames LocalHostNames::of_this_machine() {
  LocalHostNames local;
  local.names = {"localhost", "localhost.localdomain", "ip6-localhost"};
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') {
    std::string full(name);
    local.names.push_back(full);
    if (size_t dot = full.find('.'); dot != std::string::npos)
      local.names.push_back(full.substr(0, dot));  // short form of an FQDN
  }
  return local;
}

namespace {

// Ranks fill the hosts in order; hosts left without a rank are dropped.
Result<JobPlan> plan_multi_host(const LaunchOptions& options, JobPlan plan) {
  plan.multi_host = true;
  int total = 0;
  for (const HostSlots& h : options.hosts) {
    for (const HostSlots& seen : plan.hosts)
      if (seen.host == h.host)
        return invalid_argument("host '" + h.host + "' is given twice; give it once with the "
                                "total slot count");
    int left = (options.num_proc ? *options.num_proc : 1 << 30) - total;
    int here = std::min(h.slots, left);
    if (here <= 0) break;
    plan.hosts.push_back(HostSlots{h.host, here});
    total += here;
  }
  plan.size = total;
  if (!options.num_proc)
    plan.notes.push_back("-np not given: starting " + std::to_string(total) +
                         " ranks, one per slot of the hosts given");
  plan.cross_size = static_cast<int>(plan.hosts.size());
  int rank = 0;
  for (size_t h = 0; h < plan.hosts.size(); ++h) {
    for (int l = 0; l < plan.hosts[h].slots; ++l)
      plan.ranks.push_back(RankSlot{rank++, plan.hosts[h].host, l, plan.hosts[h].slots,
                                    static_cast<int>(h)});
    plan.local_size = std::max(plan.local_size, plan.hosts[h].slots);
  }
  // GPUs of the other hosts are not visible from here: a GPU job only when asked for, or when
  // this host has GPUs (the cluster is taken to be uniform).
  return plan;
}

}  // namespace

Result<JobPlan> plan_job(const LaunchOptions& options, const GpuInventory& gpus,
                         const std::string& device, const LocalHostNames& local) {
  JobPlan plan;
  plan.gpus = gpus;
  const int gpu_count = static_cast<int>(gpus.visible_devices.size());
  if (device == "gpu" && gpu_count == 0)
    return invalid_argument("--device gpu, but no GPU is visible on this host (" + gpus.source +
                            ")");
  plan.gpu_job = device == "gpu" || (device == "auto" && gpu_count > 0);

  // Job shape: hosts first, then how many ranks.
  std::string host = "localhost";
  int slots = -1;  // -1: not limited by -H
  if (!options.hosts.empty()) {
    std::string given = options.hostfile.empty() ? "-H" : "--hostfile " + options.hostfile;
    int total = 0;
    for (const HostSlots& h : options.hosts) total += h.slots;
    if (options.num_proc && *options.num_proc > total)
      return invalid_argument("-np " + std::to_string(*options.num_proc) + " is more than the " +
                              std::to_string(total) + " slots that " + given +
                              " provides; lower -np or add slots");
    bool all_local = true;
    for (const HostSlots& h : options.hosts) all_local &= local.is_local(h.host);
    if (!all_local) return plan_multi_host(options, std::move(plan));
    if (options.hosts.size() > 1)
      return invalid_argument(given + " names this machine " + std::to_string(options.hosts.size()) +
                              " times (" + options.hosts[0].host + ", " + options.hosts[1].host +
                              "); give it once with the total slot count");
    host = options.hosts[0].host;
    slots = options.hosts[0].slots;
  }

  if (options.num_proc) {
    plan.size = *options.num_proc;
  } else if (slots > 0) {
    plan.size = slots;
    plan.notes.push_back("-np not given: starting " + std::to_string(slots) +
                         " ranks, one per slot of " + host);
  } else if (plan.gpu_job) {
    plan.size = gpu_count;
    plan.notes.push_back("-np not given: starting " + std::to_string(gpu_count) +
                         " ranks, one per GPU found (" + gpus.source + ")");
  } else {
    plan.size = 1;
    plan.notes.push_back("-np not given and no GPU found (" + gpus.source +
                         "): starting 1 rank");
  }
  plan.local_size = plan.size;

  if (plan.gpu_job && plan.local_size > gpu_count)
    return invalid_argument(
        std::to_string(plan.local_size) + " ranks on " + host + " but only " +
        std::to_string(gpu_count) + " GPU" + (gpu_count == 1 ? "" : "s") + " visible (" +
        gpus.source + "); use -np " + std::to_string(gpu_count) +
        ", or --device cpu for a CPU-only job");

  for (int r = 0; r < plan.size; ++r) plan.ranks.push_back(RankSlot{r, host, r});
  return plan;
}

}  // namespace hvrun::launcher
