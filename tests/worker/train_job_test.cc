// examples/train as a real job: the loss falls and every rank ends with identical weights.
#include <gtest/gtest.h>

#include "tests/support/worker_job.h"
#include "tests/worker/train_output.h"

namespace hvrun::test {
namespace {

void expect_trained(const JobResult& job, int epochs) {
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  std::vector<double> losses = epoch_losses(job.ranks[0].out);
  ASSERT_EQ(losses.size(), static_cast<size_t>(epochs)) << job.ranks[0].out;
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << job.ranks[0].out;
  EXPECT_TRUE(job.printed("weights identical")) << job.describe();
}

TEST(WorkerTrain, TwoRanksConvergeWithIdenticalWeights) {
  expect_trained(run_job(2, {bin_path("train"), "--epochs", "5"}), 5);
}

TEST(WorkerTrain, UnevenBatchesFinishWithJoin) {
  expect_trained(run_job(3, {bin_path("train"), "--epochs", "4", "--uneven"}), 4);
}

}  // namespace
}  // namespace hvrun::test
