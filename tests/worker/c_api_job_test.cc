// The C test program (c_api_test.c) as ranks of a real job.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hvrun::test
