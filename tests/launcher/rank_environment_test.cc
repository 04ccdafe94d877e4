#include "launcher/plan/rank_environment.h"

#include <gtest/gtest.h>

#include "common/setting_keys.h"

namespace hvrun::launcher {
namespace {

JobPlan gpu_plan(int ranks, std::vector<std::string> devices, bool user_set = false) {
  JobPlan plan;
  plan.size = plan.local_size = ranks;
  plan.gpu_job = !devices.empty();
  plan.gpus.visible_devices = std::move(devices);
  plan.gpus.user_set_visible_devices = user_set;
  for (int r = 0; r < ranks; ++r) plan.ranks.push_back(RankSlot{r, "localhost", r});
  return plan;
}

PeerAccessProbe peer_access(bool ok, int* calls = nullptr) {
  return PeerAccessProbe{[ok, calls](int, int, std::string*) -> std::optional<bool> {
    if (calls != nullptr) ++*calls;
    return ok;
  }};
}

JobIdentity identity() { return JobIdentity{"127.0.0.1:4000", "s3cr3t", "job-1", "127.0.0.1"}; }

TEST(RankEnvironmentTest, SetsHvrunTorchAndHorovodNames) {
  JobPlan plan = gpu_plan(2, {});
  Settings settings;
  ASSERT_TRUE(settings.set("cache_capacity", "7", SettingSource::kFlag).is_ok());
  Environment inherited{{"PATH", "/bin"}, {"RANK", "stale"}};
  Environment env = rank_environment(plan, 1, identity(), settings, NcclTuning{}, inherited);
  EXPECT_EQ(env["PATH"], "/bin");
  EXPECT_EQ(env["HVRUN_RANK"], "1");
  EXPECT_EQ(env["HVRUN_SIZE"], "2");
  EXPECT_EQ(env["HVRUN_LOCAL_RANK"], "1");
  EXPECT_EQ(env["HVRUN_LOCAL_SIZE"], "2");
  EXPECT_EQ(env["HVRUN_CROSS_RANK"], "0");
  EXPECT_EQ(env["HVRUN_CROSS_SIZE"], "1");
  EXPECT_EQ(env["HVRUN_HOST"], "localhost");
  EXPECT_EQ(env["HVRUN_COORDINATOR_ADDR"], "127.0.0.1:4000");
  EXPECT_EQ(env["HVRUN_SECRET"], "s3cr3t");
  EXPECT_EQ(env["HVRUN_JOB_ID"], "job-1");
  EXPECT_EQ(env["HVRUN_DATA_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["HVRUN_CACHE_CAPACITY"], "7");
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(env["HOROVOD_RANK"], "1");
  EXPECT_EQ(env["HOROVOD_SIZE"], "2");
  EXPECT_EQ(env["HOROVOD_LOCAL_RANK"], "1");
  EXPECT_EQ(env["HOROVOD_LOCAL_SIZE"], "2");
  EXPECT_EQ(env["HOROVOD_CROSS_RANK"], "0");
  EXPECT_EQ(env["HOROVOD_CROSS_SIZE"], "1");
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);

  auto shown = describe_additions(env, inherited);
  bool masked = false;
  for (const auto& [k, v] : shown) {
    EXPECT_NE(v, "s3cr3t");
    masked |= k == "HVRUN_SECRET" && v == "<hidden>";
  }
  EXPECT_TRUE(masked);
}

TEST(RankEnvironmentTest, GpuPinningByLocalRankOrVisibleDevices) {
  Settings local_rank;
  Environment env = rank_environment(gpu_plan(2, {"0", "1"}), 1, identity(), local_rank,
                                     NcclTuning{}, {});
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u) << "default: all GPUs stay visible";

  Settings visible;
  ASSERT_TRUE(visible.set("gpu_pinning", "visible-devices", SettingSource::kFlag).is_ok());
  env = rank_environment(gpu_plan(2, {"0", "1"}), 1, identity(), visible, NcclTuning{}, {});
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1");

  // A user-set list is indexed by local rank.
  env = rank_environment(gpu_plan(2, {"5", "GPU-abc"}, true), 1, identity(), visible,
                         NcclTuning{}, {{"CUDA_VISIBLE_DEVICES", "5,GPU-abc"}});
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-abc");
  env = rank_environment(gpu_plan(2, {"5", "GPU-abc"}, true), 0, identity(), local_rank,
                         NcclTuning{}, {{"CUDA_VISIBLE_DEVICES", "5,GPU-abc"}});
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "5,GPU-abc") << "local-rank mode keeps the user's list";
}

TEST(NcclTuningTest, OffDisablesP2pUnlessTheUserDecided) {
  NcclTuning off = decide_nccl(gpu_plan(2, {"0", "1"}), "off", {}, peer_access(true));
  EXPECT_EQ(off.set["NCCL_P2P_DISABLE"], "1");
  ASSERT_FALSE(off.reasons.empty());
  EXPECT_NE(off.reasons.back().find("--nccl-p2p off"), std::string::npos);

  NcclTuning user = decide_nccl(gpu_plan(2, {"0", "1"}), "off", {{"NCCL_P2P_DISABLE", "0"}},
                                peer_access(true));
  EXPECT_TRUE(user.set.empty());
  EXPECT_NE(user.reasons.at(0).find("set by you"), std::string::npos);
}

TEST(NcclTuningTest, AutoDisablesP2pOnlyWhenAPairLacksPeerAccess) {
  int calls = 0;
  NcclTuning ok = decide_nccl(gpu_plan(3, {"0", "1", "2"}), "auto", {}, peer_access(true, &calls));
  EXPECT_TRUE(ok.set.empty());
  EXPECT_EQ(calls, 6);
  NcclTuning bad = decide_nccl(gpu_plan(2, {"0", "1"}), "auto", {}, peer_access(false));
  EXPECT_EQ(bad.set["NCCL_P2P_DISABLE"], "1");
  EXPECT_NE(bad.reasons.back().find("no peer access"), std::string::npos);

  NcclTuning single = decide_nccl(gpu_plan(1, {"0"}), "auto", {}, peer_access(false));
  EXPECT_TRUE(single.set.empty());
  NcclTuning cpu = decide_nccl(gpu_plan(2, {}), "off", {}, peer_access(false));
  EXPECT_TRUE(cpu.set.empty());
  NcclTuning unknown = decide_nccl(
      gpu_plan(2, {"0", "1"}), "auto", {},
      PeerAccessProbe{[](int, int, std::string* why) -> std::optional<bool> {
        *why = "libcuda.so.1 not found";
        return std::nullopt;
      }});
  EXPECT_TRUE(unknown.set.empty());
  EXPECT_NE(unknown.reasons.back().find("libcuda.so.1 not found"), std::string::npos);
}

}  // namespace
}  // namespace hvrun::launcher
