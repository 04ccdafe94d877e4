// The C test program (c_api_test.c) as ranks of a real job.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

TEST(WorkerCApi, CollectivesFromCOnTwoAndThreeRanks) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, {bin_path("hvrun_c_api_test")});
    ASSERT_TRUE(job.all_succeeded()) << job.describe();
    EXPECT_TRUE(job.printed("c api checks ok")) << job.describe();
  }
}

// An op that cannot complete (rank 0's allreduce, which no other rank submits) ends after its
// per-op timeout, not after the job's op timeout: every rank fails with a reason naming the op
// and the timeout, well before the job-wide bound (60 s here) would end anything.
TEST(WorkerCApi, PerOpTimeoutEndsAnOpThatCannotComplete) {
  JobOptions options;
  options.timeout = std::chrono::milliseconds(45000);
  options.extra_env = {{"HVRUN_OP_TIMEOUT", "60"}};
  const auto start = std::chrono::steady_clock::now();
  JobResult job = run_job(2, {bin_path("hvrun_op_timeout_c_worker"), "1500"}, options);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_TRUE(job.printed("per-op timeout ok")) << job.describe();
  EXPECT_LT(took, std::chrono::seconds(30)) << job.describe();
}

}  // namespace
}  // namespace hvrun::test
