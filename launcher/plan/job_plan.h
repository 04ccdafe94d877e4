// Where each rank runs: turns the job-shape options (-np, -H/--hostfile, the GPUs found) into
// one slot per rank, or a one-line error a user can act on.
//
// Ranks fill the hosts in the order given (host 0's slots first). A job whose hosts are all this
// machine runs single-host; otherwise every host gets an agent (remote/remote_agents.h).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/plan/gpu_probe.h"
#include "launcher/options/options.h"

namespace hvrun::launcher {

struct RankSlot {
  int rank = 0;
  std::string host;  // as the user wrote it in -H (or "localhost")
  int local_rank = 0;
  int local_size = 0;  // ranks on this host; 0: the plan's local_size (single-host plans)
  int cross_rank = 0;  // index of this host among the job's hosts
};

struct JobPlan {
  int size = 0;
  int local_size = 0;
  std::vector<RankSlot> ranks;
  bool gpu_job = false;  // local rank k uses GPU k of `gpus.visible_devices`
  GpuInventory gpus;
  std::vector<std::string> notes;  // decisions worth telling the user (e.g. how -np was chosen)
  // Multi-host jobs (some host in -H is not this machine): each host gets an agent.
  bool multi_host = false;
  int cross_size = 1;
  std::vector<HostSlots> hosts;  // the hosts that got ranks, in order, slots = ranks there
};

// Names this machine answers to: localhost, loopback addresses and its host name.
struct LocalHostNames {
  std::vector<std::string> names;
  bool is_local(const std::string& host) const;
  static LocalHostNames of_this_machine();
};

// `device` is the device setting: "auto" (GPU job when a GPU is visible), "gpu" or "cpu".
Result<JobPlan> plan_job(const LaunchOptions& options, const GpuInventory& gpus,
                         const std::string& device, const LocalHostNames& local);

}  // namespace hvrun::launcher
