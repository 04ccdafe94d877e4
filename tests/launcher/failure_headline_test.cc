// hvrun's failure summary names the first cause, every time: the rank the coordinator's abort
// names, or the rank that failed by itself, never a rank that failed after it. Each scenario
// runs 20 times (a race lost once in 20 is a wrong headline in production); the workers are
// small C++ programs, so a run takes a fraction of a second.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

constexpr int kRuns = 20;

RunOptions cpu_job() {
  RunOptions opts;
  opts.env["HVRUN_DEVICE"] = "cpu";
  opts.timeout = std::chrono::milliseconds(30000);
  return opts;
}

// The whole first line of `text` that contains `what` ("" when none does).
std::string line_with(const std::string& text, const std::string& what) {
  const size_t at = text.find(what);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  return text.substr(begin, text.find('\n', at) - begin);
}

// Runs `args` (after hvrun) kRuns times; each run must fail, its headline must contain
// `headline`, and the summary's one "<-" row must be rank `cause`'s.
void expect_named_every_time(const std::vector<std::string>& args, int cause,
                             const std::string& headline,
                             std::chrono::milliseconds each_within) {
  std::vector<std::string> argv{bin_path("hvrun")};
  argv.insert(argv.end(), args.begin(), args.end());
  int right = 0;
  for (int run = 0; run < kRuns; ++run) {
    RunResult r = run_process(argv, cpu_job());
    ASSERT_FALSE(r.timed_out) << r.err;
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_LT(r.elapsed, each_within) << "run " << run << "\n" << r.err;
    const std::string head = line_with(r.err, "hvrun: job failed: ");
    const std::string marked = line_with(r.err, "  <- ");
    const bool named = head.find(headline) != std::string::npos &&
                       marked.rfind("hvrun: " + std::to_string(cause) + " ", 0) == 0;
    EXPECT_TRUE(named) << "run " << run << " named the wrong rank:\n" << r.err;
    right += named ? 1 : 0;
  }
  EXPECT_EQ(right, kRuns);
}

// Rank 1 reports its own failure to the coordinator (as a trainer's uncaught exception is
// reported) and exits 1 once that took effect; the others fail on the abort at the same time.
TEST(FailureHeadlineTest, ARankReportingItsFailureIsNamedNotTheRanksThatFollowed) {
  expect_named_every_time({"-np", "3", "--grace-period", "5", bin_path("launcher_test_worker"),
                           "report", "1"},
                          1, "rank 1 failed: ValueError: boom", std::chrono::seconds(5));
}

// Rank 1 exits with code 3 without a word to the coordinator; the others fail on the abort
// that its lost connection causes.
TEST(FailureHeadlineTest, ARankExitingByItselfIsNamedWithItsCode) {
  expect_named_every_time({"-np", "3", "--grace-period", "5", bin_path("launcher_test_worker"),
                           "exit", "1", "3"},
                          1, "rank 1 on", std::chrono::seconds(5));
}

// Rank 1 aborts the job and stays alive: the others' exits, though seen first, follow it.
TEST(FailureHeadlineTest, ARankAbortingTheJobIsNamedWhileItStillRuns) {
  expect_named_every_time({"-np", "3", "--grace-period", "5", bin_path("launcher_test_worker"),
                           "abort", "1"},
                          1, "rank 1 gave up", std::chrono::seconds(5));
}

// Rank 1 is stopped: the coordinator names it after the heartbeat timeout (long enough that a
// loaded machine never misses a healthy rank's heartbeats for that long), the others fail on
// that abort, and the stopped rank (SIGTERM and SIGCONT) ends at once, not after the 20 s
// grace period.
TEST(FailureHeadlineTest, AStoppedRankIsNamedAndEndsWithoutWaitingTheGracePeriod) {
  expect_named_every_time({"-np", "3", "--heartbeat-timeout", "1.5", "--grace-period", "20",
                           bin_path("launcher_test_worker"), "stop", "1"},
                          1, "rank 1 on host localhost", std::chrono::seconds(8));
}

}  // namespace
}  // namespace hvrun::test
