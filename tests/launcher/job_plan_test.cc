#include "launcher/plan/job_plan.h"

#include <gtest/gtest.h>

namespace hvrun::launcher {
namespace {

const char* no_env(const char*) { return nullptr; }

LaunchOptions parse(const std::vector<std::string>& args) {
  auto r = parse_command_line(args, no_env);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : LaunchOptions{};
}

GpuInventory gpus(int n) {
  GpuInventory inv;
  for (int i = 0; i < n; ++i) inv.visible_devices.push_back(std::to_string(i));
  inv.source = n > 0 ? "NVML" : "no NVIDIA driver";
  return inv;
}

LocalHostNames local() { return LocalHostNames{{"localhost", "trainer-3"}}; }

TEST(JobPlanTest, NumProcDefaultsToGpusThenSlotsThenOne) {
  auto on_gpus = plan_job(parse({"./train"}), gpus(4), "auto", local());
  ASSERT_TRUE(on_gpus.is_ok()) << on_gpus.status().message();
  EXPECT_EQ(on_gpus->size, 4);
  EXPECT_TRUE(on_gpus->gpu_job);
  ASSERT_EQ(on_gpus->notes.size(), 1u);
  EXPECT_NE(on_gpus->notes[0].find("one per GPU"), std::string::npos);

  auto no_gpu = plan_job(parse({"./train"}), gpus(0), "auto", local());
  ASSERT_TRUE(no_gpu.is_ok());
  EXPECT_EQ(no_gpu->size, 1);
  EXPECT_FALSE(no_gpu->gpu_job);
  ASSERT_EQ(no_gpu->notes.size(), 1u);
  EXPECT_NE(no_gpu->notes[0].find("no GPU found"), std::string::npos);

  auto slots = plan_job(parse({"-H", "localhost:3", "./train"}), gpus(0), "auto", local());
  ASSERT_TRUE(slots.is_ok());
  EXPECT_EQ(slots->size, 3);
}

TEST(JobPlanTest, RanksGetLocalRanksOnTheHostAsWritten) {
  auto plan = plan_job(parse({"-np", "3", "-H", "trainer-3:4", "x"}), gpus(0), "auto", local());
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->ranks.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(plan->ranks[r].rank, r);
    EXPECT_EQ(plan->ranks[r].local_rank, r);
    EXPECT_EQ(plan->ranks[r].host, "trainer-3");
  }
  EXPECT_EQ(plan->local_size, 3);
}

TEST(JobPlanTest, LoopbackAndHostNameAreLocalOtherHostsMakeAMultiHostJob) {
  auto single = plan_job(parse({"-H", "127.0.0.1:2", "x"}), gpus(0), "auto", local());
  ASSERT_TRUE(single.is_ok());
  EXPECT_FALSE(single->multi_host);
  auto remote = plan_job(parse({"-H", "node9:2", "x"}), gpus(0), "auto", local());
  ASSERT_TRUE(remote.is_ok()) << remote.status().message();
  EXPECT_TRUE(remote->multi_host);
  ASSERT_EQ(remote->hosts.size(), 1u);
  EXPECT_EQ(remote->hosts[0].host, "node9");
  auto twice = plan_job(parse({"-H", "localhost:1,127.0.0.1:1", "x"}), gpus(0), "auto", local());
  EXPECT_FALSE(twice.is_ok());
  EXPECT_TRUE(LocalHostNames::of_this_machine().is_local("localhost"));
}

TEST(JobPlanTest, MultiHostRanksFillHostsInOrder) {
  auto plan = plan_job(parse({"-np", "5", "-H", "a:2,b:4,c:2", "x"}), gpus(0), "auto", local());
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_EQ(plan->size, 5);
  ASSERT_EQ(plan->hosts.size(), 2u);  // c got no rank
  EXPECT_EQ(plan->cross_size, 2);
  EXPECT_EQ(plan->ranks[1].host, "a");
  EXPECT_EQ(plan->ranks[1].local_rank, 1);
  EXPECT_EQ(plan->ranks[1].local_size, 2);
  EXPECT_EQ(plan->ranks[4].host, "b");
  EXPECT_EQ(plan->ranks[4].local_rank, 2);
  EXPECT_EQ(plan->ranks[4].local_size, 3);
  EXPECT_EQ(plan->ranks[4].cross_rank, 1);
  auto dup = plan_job(parse({"-H", "a:2,a:2", "x"}), gpus(0), "auto", local());
  ASSERT_FALSE(dup.is_ok());
  EXPECT_NE(dup.status().message().find("'a' is given twice"), std::string::npos);
}

TEST(JobPlanTest, TooManyRanksForSlotsOrGpusIsAClearError) {
  auto slots = plan_job(parse({"-np", "3", "-H", "localhost:2", "x"}), gpus(0), "auto", local());
  ASSERT_FALSE(slots.is_ok());
  EXPECT_NE(slots.status().message().find("-np 3"), std::string::npos);

  auto too_many = plan_job(parse({"-np", "3", "x"}), gpus(2), "auto", local());
  ASSERT_FALSE(too_many.is_ok());
  EXPECT_NE(too_many.status().message().find("only 2 GPUs"), std::string::npos)
      << too_many.status().message();
  EXPECT_NE(too_many.status().message().find("--device cpu"), std::string::npos);

  // A CPU job may run any number of ranks on a GPU host.
  auto cpu = plan_job(parse({"-np", "3", "x"}), gpus(2), "cpu", local());
  ASSERT_TRUE(cpu.is_ok());
  EXPECT_FALSE(cpu->gpu_job);

  EXPECT_FALSE(plan_job(parse({"-np", "1", "x"}), gpus(0), "gpu", local()).is_ok());
}

}  // namespace
}  // namespace hvrun::launcher
