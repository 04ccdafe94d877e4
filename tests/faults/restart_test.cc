// hvrun --max-restarts with checkpoints: a job that loses a rank carries on from its newest
// checkpoint and ends exactly where an undisturbed run ends; and when it must not restart.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun::test {
namespace {

namespace fs = std::filesystem;

class RestartTest : public ::testing::Test {
 protected:
  // hvrun [hvrun_flags] -np 2 -H localhost:2 COMMAND..., CPU job, bounded.
  RunResult hvrun(std::vector<std::string> hvrun_flags, const std::vector<std::string>& command) {
    std::vector<std::string> argv{bin_path("hvrun")};
    argv.insert(argv.end(), hvrun_flags.begin(), hvrun_flags.end());
    for (const char* a : {"-np", "2", "-H", "localhost:2"}) argv.push_back(a);
    argv.insert(argv.end(), command.begin(), command.end());
    RunOptions options;
    options.env["HVRUN_DEVICE"] = "cpu";
    options.timeout = std::chrono::seconds(90);
    return run_process(argv, options);
  }

  // 5 epochs x 10 batches = 50 steps, a checkpoint every 10.
  RunResult train(const std::string& checkpoints, std::vector<std::string> extra_hvrun,
                  std::vector<std::string> extra_train) {
    std::vector<std::string> flags{"--checkpoint-dir", checkpoints, "--checkpoint-every", "10"};
    flags.insert(flags.end(), extra_hvrun.begin(), extra_hvrun.end());
    std::vector<std::string> command{bin_path("train"), "--epochs", "5", "--batches", "10"};
    command.insert(command.end(), extra_train.begin(), extra_train.end());
    return hvrun(flags, command);
  }

  static std::string checksum(const std::string& out) {
    std::smatch m;
    static const std::regex line(R"(rank 0: weights identical on all 2 ranks \(checksum ([0-9a-f]+)\))");
    return std::regex_search(out, m, line) ? m[1].str() : "";
  }

  const TempDir temp_{"restart-test"};
  const std::string dir_ = temp_.path();
};

TEST_F(RestartTest, AKilledRankResumesFromTheCheckpointAndEndsBitwiseIdentical) {
  RunResult reference = train(dir_ + "/reference", {}, {});
  ASSERT_EQ(reference.exit_code, 0) << reference.out << reference.err;
  const std::string expected = checksum(reference.out);
  ASSERT_FALSE(expected.empty()) << reference.out;

  RunResult r = train(dir_ + "/restarted", {"--max-restarts", "2"},
                      {"--fail-at-step", "25", "--fail-rank", "1"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("killing myself after step 25"), std::string::npos) << r.err;
  // The log names the restart and its cause: rank 1, killed.
  EXPECT_NE(r.err.find("hvrun: restart 1 of 2 after"), std::string::npos) << r.err;
  std::smatch cause;
  EXPECT_TRUE(std::regex_search(r.err, cause, std::regex("restart 1 of 2 after [^\n]*rank 1[^\n]*SIGKILL")))
      << r.err;
  EXPECT_NE(r.err.find("the job succeeded after 1 restart(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("resumed from the checkpoint of step 20"), std::string::npos) << r.out;
  EXPECT_EQ(checksum(r.out), expected) << "the restarted job must end with the undisturbed weights\n"
                                       << r.out;
  // Checkpoints 30..50 were written after the restart; the newest three are kept.
  EXPECT_TRUE(fs::exists(dir_ + "/restarted/ckpt-000000000050.hvckpt"));
  EXPECT_FALSE(fs::exists(dir_ + "/restarted/ckpt-000000000010.hvckpt"));
}

TEST_F(RestartTest, ZeroRestartsKeepsTodaysBehaviour) {
  RunResult r = train(dir_ + "/once", {"--max-restarts", "0"}, {"--fail-at-step", "5"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 128 + 9) << r.out << r.err;  // rank 1's SIGKILL, as without the flag
  EXPECT_EQ(r.err.find("hvrun: restart"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
}

TEST_F(RestartTest, AJobFailingOnEveryStartStopsAtTheLimitWithTheCause) {
  // A different exit code each attempt, so that only the limit stops it.
  RunResult r = hvrun({"--max-restarts", "2"},
                      {"/bin/sh", "-c", "[ \"$HVRUN_RANK\" = 1 ] && exit $((HVRUN_RESTART_COUNT + 3)); exit 0"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("restart 1 of 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("restart 2 of 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("all 2 restart(s) of --max-restarts are used; last cause:"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("the job failed after 2 restart(s)"), std::string::npos) << r.err;
}

TEST_F(RestartTest, TheSameQuickFailureTwiceStopsEarly) {
  RunResult r = hvrun({"--max-restarts", "5"},
                      {"/bin/sh", "-c", "[ \"$HVRUN_RANK\" = 1 ] && exit 3; exit 0"});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("restart 1 of 5"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("restart 2 of 5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("failed the same way twice"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hvrun::test
