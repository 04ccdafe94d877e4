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

TEST(HvrunCliTest, UnknownFlagExitsTwoWithOneLine) {
  RunResult r = run_process({bin_path("hvrun"), "--frobnicate", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(split_lines(r.err).size(), 1u) << r.err;
}

}  // namespace
}  // namespace hvrun::test
