#include "launcher/attempt/placement_choice.h"

#include <gtest/gtest.h>

namespace hvrun::launcher {
namespace {

const char* no_env(const char*) { return nullptr; }

JobPlan plan_of(const std::vector<std::string>& args) {
  auto opts = parse_command_line(args, no_env);
  EXPECT_TRUE(opts.is_ok()) << opts.status().message();
  auto plan = plan_job(*opts, GpuInventory{}, "cpu", LocalHostNames{{"localhost", "trainer-3"}});
  EXPECT_TRUE(plan.is_ok()) << plan.status().message();
  return plan.is_ok() ? *plan : JobPlan{};
}

ElasticOptions elastic(std::string discovery_script) {
  ElasticOptions o;
  o.enabled = true;
  o.discovery_script = std::move(discovery_script);
  return o;
}

TEST(PlacementChoiceTest, RanksOfThisMachineAloneAreForkedHere) {
  EXPECT_EQ(choose_placement(plan_of({"-np", "2", "./train"}), ElasticOptions{}, false),
            PlacementKind::kLocalProcesses);
  // Elastic without a discovery script: no host can join, every rank stays here.
  EXPECT_EQ(choose_placement(plan_of({"-np", "2", "./train"}), elastic(""), false),
            PlacementKind::kLocalProcesses);
}

TEST(PlacementChoiceTest, ARankPlannedOnAnotherHostStartsThroughItsAgent) {
  EXPECT_EQ(choose_placement(plan_of({"-H", "localhost:1,node-b:1", "./train"}),
                             ElasticOptions{}, false),
            PlacementKind::kRemoteAgents);
}

TEST(PlacementChoiceTest, AJobThatMayGrowStartsThroughAgentsFromTheStart) {
  // The script may name another host later: its ranks must start there, not here.
  const JobPlan plan = plan_of({"-np", "2", "./train"});
  ASSERT_FALSE(plan.multi_host);
  EXPECT_EQ(choose_placement(plan, elastic("./discover.sh"), false), PlacementKind::kRemoteAgents);
  const JobPlan agents = plan_for_agents(plan);
  EXPECT_TRUE(agents.multi_host);
  ASSERT_EQ(agents.hosts.size(), 1u);
  EXPECT_EQ(agents.hosts[0].host, plan.ranks[0].host);
  EXPECT_EQ(agents.hosts[0].slots, 2);
  for (const RankSlot& slot : agents.ranks) {
    EXPECT_EQ(slot.host, plan.ranks[0].host);
    EXPECT_EQ(slot.local_size, 2);
    EXPECT_EQ(slot.cross_rank, 0);
  }
}

TEST(PlacementChoiceTest, MpiHandsEveryRankToMpirun) {
  EXPECT_EQ(choose_placement(plan_of({"-H", "localhost:1,node-b:1", "./train"}),
                             ElasticOptions{}, true),
            PlacementKind::kMpirun);
}

}  // namespace
}  // namespace hvrun::launcher
