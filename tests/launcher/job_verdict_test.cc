// Which failure a job's end is told by (launcher/supervisor/job_verdict.h): the coordinator's verdict
// names the cause; a rank that failed after it is a consequence.
#include "launcher/supervisor/job_verdict.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <vector>

namespace hvrun::launcher {
namespace {

int exited_with(int code) { return code << 8; }  // as waitpid reports it

std::vector<WorkerRecord> three_ranks() {
  std::vector<WorkerRecord> workers(3);
  for (int r = 0; r < 3; ++r) {
    workers[static_cast<size_t>(r)].rank = r;
    workers[static_cast<size_t>(r)].host = "localhost";
    workers[static_cast<size_t>(r)].pid = 100 + r;
  }
  return workers;
}

TEST(JobVerdictTest, WithoutAVerdictTheFirstFailureSeenIsTheCause) {
  auto workers = three_ranks();
  workers[2].exited = true;
  workers[2].wait_status = exited_with(4);
  const JobEnd end = first_cause(worker_failure(workers[2]), std::nullopt, workers);
  EXPECT_EQ(end.kind, JobEndKind::kWorkerFailed);
  EXPECT_EQ(end.rank, 2);
  EXPECT_EQ(end.exit_code, 4);
  EXPECT_EQ(end.message, "rank 2 on localhost (pid 102) exited with code 4");
}

TEST(JobVerdictTest, AnExitAfterTheCoordinatorNamedARunningRankIsAConsequence) {
  auto workers = three_ranks();
  workers[0].exited = true;
  workers[0].wait_status = exited_with(1);
  const CoordinatorVerdict verdict{"rank 1 on host localhost (pid 101) sent no heartbeat", 1,
                                   "localhost"};
  const JobEnd end = first_cause(worker_failure(workers[0]), verdict, workers);
  EXPECT_EQ(end.kind, JobEndKind::kControlPlane);
  EXPECT_EQ(end.rank, 1);
  EXPECT_EQ(end.exit_code, 1);
  EXPECT_EQ(end.message, "job aborted: rank 1 on host localhost (pid 101) sent no heartbeat");
  EXPECT_TRUE(awaits_named_rank(end, workers));
}

TEST(JobVerdictTest, TheNamedRanksOwnFailedExitTellsItWithTheCoordinatorsReason) {
  auto workers = three_ranks();
  workers[0].exited = true;
  workers[0].wait_status = exited_with(1);
  workers[1].exited = true;
  workers[1].wait_status = SIGKILL;  // killed by SIGKILL
  const CoordinatorVerdict verdict{"rank 1 disconnected without saying goodbye", 1, "localhost"};
  const JobEnd end = first_cause(worker_failure(workers[0]), verdict, workers);
  EXPECT_EQ(end.kind, JobEndKind::kWorkerFailed);
  EXPECT_EQ(end.rank, 1);
  EXPECT_EQ(end.exit_code, 128 + SIGKILL);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_EQ(end.message, "rank 1 on localhost (pid 101) was killed by SIGKILL (coordinator: rank 1 "
                         "disconnected without saying goodbye)");
  EXPECT_FALSE(awaits_named_rank(end, workers));
}

TEST(JobVerdictTest, ANamedRankStoppedByHvrunOrExitingZeroKeepsTheVerdict) {
  auto workers = three_ranks();
  workers[1].exited = true;
  workers[1].wait_status = SIGTERM;
  workers[1].signalled_by_hvrun = true;
  workers[2].exited = true;
  workers[2].wait_status = exited_with(0);
  for (int named : {1, 2}) {
    const CoordinatorVerdict verdict{"stall shutdown", named, "localhost"};
    const JobEnd end = first_cause(JobEnd{JobEndKind::kControlPlane, -1, 1, 0, "x"}, verdict, workers);
    EXPECT_EQ(end.kind, JobEndKind::kControlPlane) << named;
    EXPECT_EQ(end.rank, named);
    EXPECT_FALSE(awaits_named_rank(end, workers)) << named;
  }
  const CoordinatorVerdict at_start{"rendezvous timed out", 2, "localhost", true};
  EXPECT_EQ(first_cause(JobEnd{}, at_start, workers).message,
            "registration failed: rendezvous timed out");
}

}  // namespace
}  // namespace hvrun::launcher
