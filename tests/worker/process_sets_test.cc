// Process sets end to end: worker processes against a real coordinator (run_job), on the shared
// memory and Gloo data planes.
#include <gtest/gtest.h>

#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

struct SetCase {
  const char* mode;
  int np;
  const char* backend;
  const char* printed;
};

class ProcessSetJobTest : public ::testing::TestWithParam<SetCase> {};

TEST_P(ProcessSetJobTest, RunsAndChecksItsValues) {
  const SetCase& c = GetParam();
  JobOptions options;
  options.timeout = std::chrono::seconds(90);
  options.extra_env = {{"HVRUN_CPU_BACKEND", c.backend}};
  JobResult job = run_job(c.np, {bin_path("hvrun_test_process_sets"), c.mode}, options);
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_TRUE(job.printed(c.printed)) << job.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ProcessSetJobTest,
    ::testing::Values(SetCase{"disjoint", 4, "auto", "disjoint sets ok"},
                      SetCase{"disjoint", 3, "gloo", "disjoint sets ok"},
                      SetCase{"disjoint", 4, "gloo", "disjoint sets ok"},
                      SetCase{"overlapping", 3, "auto", "overlapping sets ok"},
                      SetCase{"overlapping", 4, "gloo", "overlapping sets ok"},
                      SetCase{"churn", 3, "auto", "churn ok"},
                      SetCase{"churn", 4, "gloo", "churn ok"},
                      SetCase{"refusals", 3, "auto", "refusals ok"}),
    [](const auto& test_info) {
      return std::string(test_info.param.mode) + "_np" + std::to_string(test_info.param.np) + "_" +
             test_info.param.backend;
    });

}  // namespace
}  // namespace hvrun::test
