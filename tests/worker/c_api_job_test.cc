// The C test program (c_api_test.c) as ranks of a real job.
#include <gtest/gtest.h>

#include "tests/worker/worker_harness.h"

namespace hvrun::test {
namespace {

TEST(WorkerCApi, CollectivesFromCOnTwoAndThreeRanks) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, {bin_path("hvrun_c_api_test")});
    ASSERT_TRUE(job.all_succeeded()) << job.describe();
    for (const auto& r : job.ranks) EXPECT_NE(r.out.find("c api checks ok"), std::string::npos);
  }
}

}  // namespace
}  // namespace hvrun::test
