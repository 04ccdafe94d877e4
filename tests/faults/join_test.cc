// Uneven ranks through join (labels worker, faults): 3, 5 and 7 batches end with identical
// weights; every collective keeps working while a rank is joined (allgather, broadcast from a
// root that has not joined, alltoall, reducescatter, Min/Max/Product identities), a broadcast
// from the joined root fails on every rank, and Average divides by the contributing ranks, or
// by all ranks with --join-average all (through the real hvrun).
#include <gtest/gtest.h>

#include "tests/support/subprocess.h"
#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

std::vector<std::string> faults_worker(const std::string& mode) {
  return {bin_path("hvrun_faults_worker"), mode};
}

TEST(Join, RanksWith3And5And7BatchesFinishWithIdenticalWeights) {
  JobResult job = run_job(3, faults_worker("uneven-train"), {.timeout = std::chrono::seconds(60)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_TRUE(job.printed("weights identical on every rank")) << job.describe();
}

TEST(Join, EveryCollectiveWorksWhileARankIsJoined) {
  JobResult job = run_job(3, faults_worker("joined-ops"), {.timeout = std::chrono::seconds(60)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  for (int r : {1, 2}) {
    EXPECT_NE(job.ranks[r].out.find("broadcast from joined root failed as expected"), std::string::npos)
        << job.describe();
    EXPECT_NE(job.ranks[r].out.find("every op worked with joined ranks, 0 failures"), std::string::npos)
        << job.describe();
  }
}

TEST(Join, JoinAverageAllDividesByEveryRankThroughHvrun) {
  RunOptions run;
  run.timeout = std::chrono::seconds(60);
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "-H", "localhost:3", "--join-average",
                             "all", bin_path("hvrun_faults_worker"), "joined-ops", "all"},
                            run);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[1]<stdout>:rank 1: every op worked with joined ranks, 0 failures"),
            std::string::npos)
      << r.out << r.err;
}

}  // namespace
}  // namespace hvrun::test
