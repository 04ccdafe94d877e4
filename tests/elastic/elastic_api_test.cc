// The C++ and C elastic APIs (hvrun/elastic.h, hvrun_elastic_run) in real hvrun jobs: a rank
// SIGKILLed mid-run makes the survivors restore their last commit, reset and finish on the
// smaller membership, or on the same size with a hot spare in its place; outside an elastic job
// the function runs once. Each job is bounded by
// run_process's timeout, which kills its process group.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

class ElasticApiTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ElasticApiTest, ALostRankIsRestoredFromTheLastCommitAndTheSurvivorsGoOn) {
  RunOptions run;
  run.timeout = std::chrono::seconds(90);
  run.env["ELASTIC_KILL_RANK"] = "2";
  run.env["ELASTIC_KILL_AT"] = "5";
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--min-np", "2", bin_path(GetParam())}, run);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Steps 1-4 on 3 ranks (committed at step 4; step 5's sum died with rank 2), then steps 5-10
  // on 2: 3 * 4 + 2 * 6.
  EXPECT_NE(r.out.find("TOTAL 24 SIZE 2 RESETS 1"), std::string::npos) << r.out << r.err;
}

TEST_P(ElasticApiTest, AHotSpareTakesTheLostRanksPlaceAndTheSizeStays) {
  RunOptions run;
  run.timeout = std::chrono::seconds(90);
  run.env["ELASTIC_KILL_RANK"] = "2";
  run.env["ELASTIC_KILL_AT"] = "5";
  RunResult r =
      run_process({bin_path("hvrun"), "-np", "3", "--spares", "1", bin_path(GetParam())}, run);
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Steps 1-4 on 3 ranks (committed at step 4), then steps 5-10 on 3 again, the spare in rank
  // 2's place: 3 * 10, the total of a run that lost nobody.
  EXPECT_NE(r.out.find("TOTAL 30 SIZE 3 RESETS 1"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.err.find("spare(s) in the lost ranks' place: the worker started as rank 3"),
            std::string::npos)
      << r.err;
}

TEST_P(ElasticApiTest, OutsideAnElasticJobTheFunctionRunsOnce) {
  RunOptions run;
  run.timeout = std::chrono::seconds(60);
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", bin_path(GetParam())}, run);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("TOTAL 20 SIZE 2 RESETS 0"), std::string::npos) << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(CppAndC, ElasticApiTest,
                         ::testing::Values("hvrun_elastic_cpp_job", "hvrun_elastic_c_job"));

}  // namespace
}  // namespace hvrun::test
