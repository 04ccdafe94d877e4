// The submitting thread sends its own RequestBatch (Submitter::flush_outbox, which saves a hop
// to the background thread): many threads at once, cache hits and metadata changes, through
// real jobs (tests/support/worker_job.h: in-process coordinator, worker processes, shm data
// plane on one host).
#include <gtest/gtest.h>

#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

std::vector<std::string> worker(const std::string& mode) {
  return {bin_path("hvrun_submit_path_worker"), mode};
}

TEST(SubmitPath, ThreadsSubmittingCachedTensorsConcurrentlyGetCorrectResults) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, worker("cached-threads"), {.timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
  }
}

TEST(SubmitPath, LoneTinyAllreducesBackToBackStayCorrect) {
  JobResult job = run_job(2, worker("lone-latency"), {.timeout = std::chrono::seconds(60)});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

TEST(SubmitPath, ChangedShapeUnderACachedNameIsRenegotiated) {
  JobResult job = run_job(2, worker("changing-shape"), {.timeout = std::chrono::seconds(60)});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

TEST(SubmitPath, JoinNeverOvertakesAnAllreduceSubmittedBeforeIt) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, worker("async-then-join"), {.timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
  }
}

TEST(SubmitPath, ShutdownWhileAnotherThreadSendsAndWaitsEndsCleanlyEveryTime) {
  JobResult job = run_job(2, worker("shutdown-race"), {.timeout = std::chrono::seconds(90)});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

}  // namespace
}  // namespace hvrun::test
