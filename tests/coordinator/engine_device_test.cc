// CUDA and CPU tensors in the negotiation engine: one name on CPU in one rank and on a GPU in
// another is an error on every rank naming both; fusion never mixes devices.
#include "tests/coordinator/engine_sim.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

v1::TensorRequest on_cuda(v1::TensorRequest r) {
  r.set_device(v1::DEVICE_KIND_CUDA);
  return r;
}

TEST(EngineDevice, CpuOnOneRankCudaOnAnotherFailsOnEveryRankNamingBoth) {
  Sim sim(2);
  sim.submit(0, {allreduce("grad.w", {8})});
  sim.submit(1, {on_cuda(allreduce("grad.w", {8}))});
  ASSERT_EQ(sim.plans.size(), 1u);
  const v1::Response& response = sim.plans[0].responses(0);
  EXPECT_EQ(response.error_ranks_size(), 0) << "the tensor fails on every rank";
  const std::string& error = response.error();
  EXPECT_NE(error.find("rank 0 sent allreduce float32 [8] sum on cpu"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 1 sent allreduce float32 [8] sum on cuda"), std::string::npos) << error;
}

TEST(EngineDevice, ReadyCpuAndCudaAllreducesAreNeverFusedTogether) {
  Sim sim(2);
  for (int rank = 0; rank < 2; ++rank)
    sim.submit(rank, {allreduce("cpu.a", {4}), on_cuda(allreduce("gpu.b", {4})),
                      allreduce("cpu.c", {4}), on_cuda(allreduce("gpu.d", {4}))});
  sim.advance(std::chrono::milliseconds(5));
  std::vector<v1::Response> responses = sim.responses();
  ASSERT_EQ(responses.size(), 2u);
  for (const auto& r : responses) {
    ASSERT_TRUE(r.error().empty()) << r.error();
    ASSERT_EQ(r.tensors_size(), 2);
    const bool cuda = r.device() == v1::DEVICE_KIND_CUDA;
    EXPECT_EQ(r.tensors(0).name()[0], cuda ? 'g' : 'c') << r.tensors(0).name();
    EXPECT_EQ(r.tensors(1).name()[0], cuda ? 'g' : 'c') << r.tensors(1).name();
  }
  EXPECT_NE(responses[0].device(), responses[1].device());
}

}  // namespace
}  // namespace hvrun::coordinator
