// The CUDA plugin's elastic reset on one GPU: a communicator revoked (ncclCommRevoke) and shrunk
// (ncclCommShrink, excluding nobody: one GPU holds one rank) still reduces correctly, whether the
// revoke came from the reset itself or from a failure of an elastic job. Needs a GPU and an
// NCCL with ncclCommRevoke/ncclCommShrink; skips with the reason otherwise. Losing a rank needs
// two GPUs: that path runs on the host plane (tests/worker/host_plane_jobs_test.cc).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/gpu/gpu_test_support.h"
#include "worker_lib/backends/nccl/plugin_loader.h"

namespace hvrun::detail::cuda {
namespace {

const PluginContext kOneRank{.rank = 0, .size = 1, .local_rank = 0, .host = "test",
                             .op_timeout = std::chrono::milliseconds(60000), .elastic = true};

class PlaneShrink : public ::testing::Test {
 protected:
  void SetUp() override {
    HVRUN_SKIP_WITHOUT_GPU();
    auto loaded = load_device_plane(kOneRank, default_plugin_candidates());
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    plane = std::move(loaded).value();
    if (Status support = plane->shrink_support(); !support.is_ok()) GTEST_SKIP() << support.message();
    ASSERT_TRUE(plane->use_device(0).is_ok());
    auto id = plane->make_unique_id();
    ASSERT_TRUE(id.is_ok()) << id.status().to_string();
    Status init = plane->init_communicator(*id);
    ASSERT_TRUE(init.is_ok()) << init.to_string();
  }

  // Sums {1, 2, 3, 4} over the one rank in the fusion buffer: the same values come back.
  Status reduce_and_check() {
    const std::vector<float> in{1, 2, 3, 4};
    HVRUN_ASSIGN_OR_RETURN(void* buffer, plane->fusion_buffer(in.size() * sizeof(float)));
    if (cudaMemcpy(buffer, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
      return internal_error("cudaMemcpy to the fusion buffer failed");
    HVRUN_RETURN_IF_ERROR(plane->allreduce(buffer, buffer, in.size(), DataType::kFloat32, ReduceOp::kSum, false));
    HVRUN_RETURN_IF_ERROR(plane->synchronize("the test's allreduce"));
    std::vector<float> out(in.size());
    if (cudaMemcpy(out.data(), buffer, out.size() * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
      return internal_error("cudaMemcpy from the fusion buffer failed");
    if (out != in) return internal_error("the allreduce returned other values");
    return Status::ok();
  }

  std::unique_ptr<DevicePlane> plane;
};

TEST_F(PlaneShrink, ARevokedCommunicatorFailsUntilShrunkThenReducesAgain) {
  ASSERT_TRUE(reduce_and_check().is_ok());
  Status revoked = plane->revoke_communicator();
  ASSERT_TRUE(revoked.is_ok()) << revoked.to_string();
  EXPECT_FALSE(plane->fusion_buffer(16).is_ok());  // revoked: nothing runs
  Status shrunk = plane->shrink_communicator({}, kOneRank);
  ASSERT_TRUE(shrunk.is_ok()) << shrunk.to_string();
  Status again = reduce_and_check();
  EXPECT_TRUE(again.is_ok()) << again.to_string();
}

TEST_F(PlaneShrink, AnElasticJobsFailureRevokesSoTheCommunicatorCanBeShrunk) {
  ASSERT_TRUE(reduce_and_check().is_ok());
  plane->abort("the test's membership change");
  EXPECT_EQ(plane->fusion_buffer(16).status().code(), StatusCode::kAborted);  // the abort revokes
  Status shrunk = plane->shrink_communicator({}, kOneRank);
  ASSERT_TRUE(shrunk.is_ok()) << shrunk.to_string();
  Status again = reduce_and_check();
  EXPECT_TRUE(again.is_ok()) << again.to_string();
}

}  // namespace
}  // namespace hvrun::detail::cuda
