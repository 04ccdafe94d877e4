// examples/train through the real launcher: `hvrun -np 2 -H localhost:2 <build>/bin/train`.
// A separate executable so that the worker's own job tests do not depend on the launcher.
#include <gtest/gtest.h>

#include "tests/support/subprocess.h"
#include "tests/worker/train_output.h"

namespace hvrun::test {
namespace {

// The README's main job, through the real launcher.
TEST(WorkerTrain, RunsUnderTheHvrunLauncher) {
  RunOptions run;
  run.timeout = std::chrono::seconds(90);
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", "-H", "localhost:2", bin_path("train"),
                             "--epochs", "4"},
                            run);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<double> losses = epoch_losses(r.out);
  ASSERT_EQ(losses.size(), 4u) << r.out;
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << r.out;
  EXPECT_NE(r.out.find("rank 0: weights identical on all 2 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1: weights identical on all 2 ranks"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hvrun::test
