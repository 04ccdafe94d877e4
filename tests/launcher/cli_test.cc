// The hvrun binary's informational commands, run as a user would.
#include <gtest/gtest.h>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

TEST(HvrunCliTest, PrintConfigShowsEverySettingAndItsSource) {
  RunOptions opts;
  opts.env["HVRUN_CYCLE_TIME"] = "3";
  RunResult r = run_process({bin_path("hvrun"), "--print-config", "--cache-capacity", "9"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fusion_threshold_mb"), std::string::npos) << r.out;
  bool saw_cycle = false, saw_cache = false;
  for (const std::string& line : split_lines(r.out)) {
    if (line.rfind("cycle_time_ms", 0) == 0) {
      saw_cycle = true;
      EXPECT_NE(line.find(" 3 "), std::string::npos) << line;
      EXPECT_NE(line.find("environment"), std::string::npos) << line;
    }
    if (line.rfind("cache_capacity", 0) == 0) {
      saw_cache = true;
      EXPECT_NE(line.find(" 9 "), std::string::npos) << line;
      EXPECT_NE(line.find("flag"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(saw_cycle && saw_cache) << r.out;
}

TEST(HvrunCliTest, BadEnvironmentValueIsOneLineNamingTheSetting) {
  RunOptions opts;
  opts.env["HVRUN_FUSION_THRESHOLD"] = "abc";
  RunResult r = run_process({bin_path("hvrun"), "--print-config"}, opts);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  auto lines = split_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("HVRUN_FUSION_THRESHOLD"), std::string::npos) << lines[0];
}

TEST(HvrunCliTest, VersionAndCheckBuild) {
  RunResult v = run_process({bin_path("hvrun"), "--version"});
  ASSERT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("hvrun ", 0), 0u) << v.out;
  RunResult b = run_process({bin_path("hvrun"), "--check-build"});
  ASSERT_EQ(b.exit_code, 0);
  EXPECT_NE(b.out.find("Gloo"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("NCCL"), std::string::npos) << b.out;
}

// horovodrun --check-build's blocks come first, in its order, as scripts grep them.
TEST(HvrunCliTest, CheckBuildStartsWithHorovodsBlocks) {
  RunResult b = run_process({bin_path("hvrun"), "--check-build"});
  ASSERT_EQ(b.exit_code, 0);
  size_t at = 0;
  for (const char* want : {"Available Frameworks:\n", "] TensorFlow\n", "] PyTorch\n",
                           "    [ ] MXNet\n", "Available Controllers:\n", "    [ ] MPI\n",
                           "    [ ] Gloo\n", "Available Tensor Operations:\n", "] NCCL\n",
                           "    [ ] DDL\n", "    [ ] CCL\n", "    [ ] MPI\n", "    [X] Gloo\n",
                           "Available data planes:"}) {
    const size_t found = b.out.find(want, at);
    ASSERT_NE(found, std::string::npos) << "'" << want << "' missing or out of order:\n" << b.out;
    at = found + 1;
  }
}

// The frameworks block says what this build has: hvrun.tensorflow's op library is built when
// CMake found TensorFlow in the project's Python environment.
TEST(HvrunCliTest, CheckBuildSaysWhetherTensorFlowIsBuilt) {
  RunResult b = run_process({bin_path("hvrun"), "--check-build"});
  ASSERT_EQ(b.exit_code, 0);
  const std::string line = HVRUN_TEST_HAVE_TENSORFLOW ? "    [X] TensorFlow\n" : "    [ ] TensorFlow\n";
  EXPECT_NE(b.out.find(line), std::string::npos) << b.out;
}

// The same launcher under Horovod's name, taking a job line as Horovod's scripts write it.
TEST(HvrunCliTest, HorovodrunRunsAHorovodJobLine) {
  RunResult v = run_process({bin_path("horovodrun"), "--version"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out.rfind("hvrun ", 0), 0u) << v.out;
  RunOptions opts;
  opts.env["HVRUN_DEVICE"] = "cpu";
  RunResult r = run_process({bin_path("horovodrun"), "-np", "1", "-H", "localhost:1", "--gloo",
                             "--hierarchical-allreduce", "--log-level", "WARNING", "--no-autotune",
                             "true"},
                            opts);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("hvrun: note: --gloo has no effect"), std::string::npos) << r.err;
  RunResult refused = run_process({bin_path("horovodrun"), "-np", "1", "--autotune", "true"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--autotune: not supported: "), std::string::npos) << refused.err;
}

TEST(HvrunCliTest, UnknownHorovodVariablesAreListedOnce) {
  RunOptions opts;
  opts.env["HOROVOD_FUSION_TRESHOLD"] = "1";
  opts.env["HOROVOD_NOT_A_KNOB"] = "1";
  opts.env["HOROVOD_CYCLE_TIME"] = "4";
  RunResult r = run_process({bin_path("hvrun"), "--print-config"}, opts);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto lines = split_lines(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_EQ(lines[0].rfind("hvrun: warning: ignoring ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("HOROVOD_FUSION_TRESHOLD"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("HOROVOD_NOT_A_KNOB"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("HOROVOD_CYCLE_TIME"), std::string::npos) << lines[0];
  EXPECT_NE(r.out.find("environment HOROVOD_CYCLE_TIME"), std::string::npos) << r.out;
}

TEST(HvrunCliTest, UnknownFlagExitsTwoWithOneLine) {
  RunResult r = run_process({bin_path("hvrun"), "--frobnicate", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(split_lines(r.err).size(), 1u) << r.err;
}

}  // namespace
}  // namespace hvrun::test
