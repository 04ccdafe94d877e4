// The NCCL data plane end to end through the real launcher: `hvrun -np 1` (NCCL refuses two
// ranks on one GPU) of the GPU test worker and of train --device cuda. Skipped, with the reason,
// where there is no GPU; there, the error a CUDA tensor gets is checked instead.
#include <gtest/gtest.h>

#include "tests/gpu/gpu_test_support.h"
#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

RunResult hvrun_np1(std::vector<std::string> command, std::chrono::seconds timeout) {
  RunOptions run;
  run.timeout = timeout;
  std::vector<std::string> argv{bin_path("hvrun"), "-np", "1"};
  argv.insert(argv.end(), command.begin(), command.end());
  return run_process(argv, run);
}

TEST(GpuJobs, EveryCollectiveOnCudaTensors) {
  HVRUN_SKIP_WITHOUT_GPU();
  RunResult r = hvrun_np1({bin_path("hvrun_gpu_worker"), "collectives"}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("gpu collectives: OK"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(GpuJobs, AbortFailsAStuckGpuCollectivePromptly) {
  HVRUN_SKIP_WITHOUT_GPU();
  RunResult r = hvrun_np1({bin_path("hvrun_gpu_worker"), "abort"}, std::chrono::seconds(120));
  // The job itself ends as aborted (hvrun exits 1); the worker saw its handle fail in time.
  EXPECT_NE(r.out.find("abort path: OK"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << "an aborted job exits non-zero: " << r.out << r.err;
}

TEST(GpuJobs, OpTimeoutFailsAStuckGpuCollectivePromptly) {
  HVRUN_SKIP_WITHOUT_GPU();
  RunResult r = hvrun_np1({"--op-timeout", "8", bin_path("hvrun_gpu_worker"), "timeout"},
                          std::chrono::seconds(120));
  EXPECT_NE(r.out.find("timeout path: OK"), std::string::npos) << r.out << r.err;
}

TEST(GpuJobs, TrainOnCuda) {
  HVRUN_SKIP_WITHOUT_GPU();
  RunResult r = hvrun_np1({bin_path("train"), "--device", "cuda", "--epochs", "3"}, std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("collectives on cuda:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("epoch 3 loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weights identical on all 1 ranks"), std::string::npos) << r.out;
}

// Where no GPU is usable, a CUDA tensor fails with a message saying so (and the job does not hang).
TEST(GpuJobs, WithoutAGpuACudaTensorGetsAClearError) {
  if (gpu_test::no_gpu_reason().empty()) GTEST_SKIP() << "this machine has a GPU: see the other tests";
  RunResult r = hvrun_np1({"--device", "cpu", bin_path("hvrun_gpu_worker"), "no-gpu"}, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS a CUDA tensor on a machine without a GPU"), std::string::npos) << r.out << r.err;
}

TEST(GpuJobs, TrainOnCudaWithoutAGpuSaysWhy) {
  if (gpu_test::no_gpu_reason().empty()) GTEST_SKIP() << "this machine has a GPU: see TrainOnCuda";
  RunResult r = hvrun_np1({"--device", "cpu", bin_path("train"), "--device", "cuda", "--epochs", "1"},
                          std::chrono::seconds(60));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--device cuda: no usable GPU"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace hvrun::test
