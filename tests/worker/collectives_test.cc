// Multi-process tests of the worker library against a real coordinator
// (tests/support/worker_job.h): N in {1, 2, 3, 4} worker processes run the checks of
// hvrun_test_worker (test_worker.cc).
#include <gtest/gtest.h>

#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

std::vector<std::string> worker(const std::string& mode) {
  return {bin_path("hvrun_test_worker"), mode};
}

class WorkerJobTest : public ::testing::TestWithParam<int> {};

// Every collective x every dtype x sizes 0, 1, 1001, plus a 64 MiB float32 allreduce.
TEST_P(WorkerJobTest, EveryCollectiveEveryDtypeMatchesReference) {
  JobResult job = run_job(GetParam(), {bin_path("hvrun_test_worker"), "collectives", "--large"});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

TEST_P(WorkerJobTest, UnevenStepsFinishWithJoin) {
  JobResult job = run_job(GetParam(), worker("join"));
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

TEST_P(WorkerJobTest, WaitWithTimeoutReturnsInsteadOfBlocking) {
  JobResult job = run_job(GetParam(), worker("timeout"));
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

INSTANTIATE_TEST_SUITE_P(Ranks, WorkerJobTest, ::testing::Values(1, 2, 3, 4));

TEST(WorkerJob, MismatchedShapesFailOnEveryRank) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, worker("mismatch"));
    ASSERT_TRUE(job.all_succeeded()) << job.describe();
    EXPECT_TRUE(job.printed("mismatch failed as expected")) << job.describe();
  }
}

TEST(WorkerJob, AbortFailsPendingHandlesWithTheReason) {
  JobResult job = run_job(3, worker("abort"));
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

TEST(WorkerJob, NamesThatAreNotUtf8TextAreRefusedAtSubmissionAndBreakNothing) {
  for (int np : {1, 3}) {
    JobResult job = run_job(np, worker("names"), {.timeout = std::chrono::seconds(60)});
    ASSERT_TRUE(job.all_succeeded()) << job.describe();
    EXPECT_TRUE(job.printed("bad names refused, job unharmed")) << job.describe();
  }
}

TEST(WorkerInit, SecondInitWithoutShutdownFailsAtOnce) {
  JobResult job = run_job(2, worker("second-init"), {.timeout = std::chrono::seconds(60)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_TRUE(job.printed("second init refused at once")) << job.describe();
}

TEST(WorkerJob, ARankLeavingWithItsFailureAbortsTheJobNamingIt) {
  JobResult job = run_job(3, worker("fail-exit"), {.timeout = std::chrono::seconds(60)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_TRUE(job.printed("failed as expected", {0, 2})) << job.describe();
}

TEST(WorkerInit, MalformedEnvironmentNamesTheVariable) {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"HVRUN_RANK", "abc"}, {"HVRUN_OP_TIMEOUT", "-5"}}) {
    RunOptions run;
    run.env = {{"HVRUN_COORDINATOR_ADDR", "127.0.0.1:1"}, {"HVRUN_SECRET", "s"}, {name, value}};
    run.timeout = std::chrono::seconds(20);
    RunResult r = run_process(worker("collectives"), run);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
  }
}

TEST(WorkerJob, WrongSecretIsRefusedWithAClearError) {
  JobOptions options;
  options.extra_env["HVRUN_SECRET"] = "not-the-job-secret";
  options.timeout = std::chrono::seconds(30);
  JobResult job = run_job(1, worker("collectives"), options);
  ASSERT_EQ(job.ranks.size(), 1u);
  EXPECT_EQ(job.ranks[0].exit_code, 2) << job.describe();
  EXPECT_NE(job.ranks[0].err.find("UNAUTHENTICATED"), std::string::npos) << job.describe();
  EXPECT_EQ(job.ranks[0].err.find("not-the-job-secret"), std::string::npos) << job.describe();
}

TEST(WorkerJob, ConcurrentSubmissionsFromSeveralThreads) {
  JobResult job = run_job(3, worker("threads"));
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

TEST(WorkerJob, KilledRankFailsTheOthersPromptly) {
  JobResult job = run_job(3, worker("killed"), {.timeout = std::chrono::seconds(40)});
  ASSERT_EQ(job.ranks.size(), 3u);
  EXPECT_EQ(job.ranks[1].exit_code, 128 + 9) << job.describe();
  for (int r : {0, 2}) {
    EXPECT_EQ(job.ranks[r].exit_code, 0) << job.describe();
    EXPECT_FALSE(job.ranks[r].timed_out);
    EXPECT_NE(job.ranks[r].out.find("as expected"), std::string::npos) << job.describe();
  }
}

TEST(WorkerJob, RankDyingAroundACollectiveFailsTheOthersWithoutHanging) {
  JobOptions options;
  options.timeout = std::chrono::seconds(60);
  options.extra_env["HVRUN_OP_TIMEOUT"] = "15";
  JobResult job = run_job(3, worker("killed-in-collective"), options);
  ASSERT_EQ(job.ranks.size(), 3u);
  EXPECT_EQ(job.ranks[1].exit_code, 128 + 9) << job.describe();
  for (int r : {0, 2}) {
    EXPECT_EQ(job.ranks[r].exit_code, 0) << job.describe();
    EXPECT_LT(job.ranks[r].elapsed, std::chrono::seconds(30)) << job.describe();
  }
}

}  // namespace
}  // namespace hvrun::test
