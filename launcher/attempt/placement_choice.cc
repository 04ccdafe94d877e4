#include "launcher/attempt/placement_choice.h"

namespace hvrun::launcher {

PlacementKind choose_placement(const JobPlan& plan, const ElasticOptions& elastic, bool mpi) {
  if (mpi) return PlacementKind::kMpirun;
  if (plan.multi_host || (elastic.enabled && !elastic.discovery_script.empty()))
    return PlacementKind::kRemoteAgents;
  return PlacementKind::kLocalProcesses;
}

JobPlan plan_for_agents(JobPlan plan) {
  if (plan.multi_host || plan.ranks.empty()) return plan;
  plan.multi_host = true;
  plan.cross_size = 1;
  plan.hosts = {HostSlots{plan.ranks.front().host, plan.size}};
  for (RankSlot& slot : plan.ranks) {
    slot.local_size = plan.size;
    slot.cross_rank = 0;
  }
  return plan;
}

}  // namespace hvrun::launcher
