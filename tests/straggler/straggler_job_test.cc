// Straggler attribution end to end: real 2-rank hvrun jobs in which one rank sleeps 20 ms more
// per step in its "data" phase. The end-of-job summary and the slowest-rank line name it, ~20 ms
// late; /metrics shows its last steps, lateness quantiles and the phase that grew while the job
// runs; --straggler-warning-ms 10 logs a warning naming it and "data". The steady state runs on
// the fast path (blocking allreduces, C++) and on cached rounds (async allreduces, C), where the
// coordinator sees no request: the attribution comes from the ranks' step timings. Timing bands
// are wide (a loaded 2-core machine). Every process is killed by pid on every path.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/metrics/http_get.h"
#include "tests/support/child_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The summary's straggler line: rank, share of steps, steps, median lateness, the phase.
struct SummaryLine {
  int rank = -1;
  int percent = 0;
  int steps = 0;
  double late_ms = 0;
  std::string phase;
};
std::optional<SummaryLine> summary_line(const std::string& err) {
  const std::regex line(R"(hvrun: straggler: rank ([0-9]+) on \S+ was last in ([0-9]+)% of )"
                        R"(([0-9]+) steps, ([0-9.]+) ms late at the median)"
                        R"re((; its phase "([a-z]+)" grew most)?)re");
  std::smatch m;
  if (!std::regex_search(err, m, line)) return std::nullopt;
  return SummaryLine{std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]), std::stod(m[4]), m[6]};
}

// The coordinator's warning (hvrun's stderr).
std::optional<SummaryLine> warning_line(const std::string& err) {
  const std::regex line(R"(straggler: rank ([0-9]+) on \S+ was last by 10\.0 ms or more in )"
                        R"(([0-9]+) of the last 10 steps, ([0-9.]+) ms late at the median)"
                        R"re((; its phase "([a-z]+)" grew most)?)re");
  std::smatch m;
  if (!std::regex_search(err, m, line)) return std::nullopt;
  return SummaryLine{std::stoi(m[1]), std::stoi(m[2]) * 10, 10, std::stod(m[3]), m[5]};
}

// The value of `family{rank="R",...[extra]}`, or -1.
double series(const std::string& page, const std::string& family, int rank,
              const std::string& extra = "") {
  const std::regex sample(family + R"(\{rank=")" + std::to_string(rank) + R"(",[^}]*)" + extra +
                          R"([^}]*\} ([-0-9.e+]+)\n)");
  std::smatch m;
  return std::regex_search(page, m, sample) ? std::stod(m[1]) : -1;
}

void expect_names_rank(const std::string& err, int slow_rank) {
  const auto summary = summary_line(err);
  ASSERT_TRUE(summary) << err;
  EXPECT_EQ(summary->rank, slow_rank) << err;
  EXPECT_GE(summary->percent, 60) << err;
  EXPECT_GE(summary->steps, 20) << err;
  EXPECT_GT(summary->late_ms, 8.0) << err;
  EXPECT_LT(summary->late_ms, 200.0) << err;
  EXPECT_EQ(summary->phase, "data") << err;
  EXPECT_NE(err.find("hvrun: slowest rank: " + std::to_string(slow_rank) + " on "),
            std::string::npos)
      << err;
  const auto warning = warning_line(err);
  ASSERT_TRUE(warning) << err;
  EXPECT_EQ(warning->rank, slow_rank) << err;
  EXPECT_GE(warning->percent, 50) << err;
  EXPECT_GT(warning->late_ms, 8.0) << err;
  EXPECT_EQ(warning->phase, "data") << err;
}

TEST(StragglerJob, TheSlowRankIsNamedInTheSummaryTheWarningAndMetrics) {
  TempDir dir("straggler-job");
  const std::string stop_file = dir.file("stop");
  HvrunProcess hvrun({"--metrics-port", "0", "--device", "cpu", "-np", "2",
                      "--straggler-warning-ms", "10", bin_path("straggler_worker"), "1", "20",
                      "2000", stop_file},
                     {});
  ASSERT_TRUE(hvrun.started());
  const std::regex printed(R"(hvrun: metrics at http://127\.0\.0\.1:([0-9]+)/metrics\n)");
  std::smatch m;
  hvrun.read_until([&](const std::string&) { return std::regex_search(hvrun.err(), m, printed); },
                   20s);
  ASSERT_TRUE(std::regex_search(hvrun.err(), m, printed)) << hvrun.err();
  const int port = std::stoi(m[1]);

  // Scrape while it runs until rank 1 was last in 30 steps (bounded).
  std::string page;
  const auto deadline = Clock::now() + 40s;
  while (Clock::now() < deadline) {
    if (auto reply = http_get(port, "/metrics", 2s); reply && reply->status == 200) {
      page = reply->body;
      if (series(page, "hvrun_rank_last_steps_total", 1) >= 30) break;
    }
    hvrun.read_until([](const std::string&) { return false; }, 200ms);  // keeps its pipes drained
  }
  std::ofstream(stop_file) << "stop\n";
  const auto code = hvrun.wait_exit(30s);
  ASSERT_TRUE(code) << "hvrun did not finish\n" << hvrun.err();
  EXPECT_EQ(*code, 0) << hvrun.err();

  const double last1 = series(page, "hvrun_rank_last_steps_total", 1);
  const double last0 = series(page, "hvrun_rank_last_steps_total", 0);
  EXPECT_GE(last1, 30) << page;
  EXPECT_GE(last0, 0) << page;
  EXPECT_GT(last1, 2 * last0) << page;
  std::smatch attributed;
  ASSERT_TRUE(std::regex_search(
      page, attributed, std::regex(R"(\nhvrun_straggler_attributed_steps_total ([0-9]+)\n)")))
      << page;
  EXPECT_GE(std::stod(attributed[1]), last1 + last0) << page;
  const double p50 = series(page, "hvrun_rank_lateness_seconds", 1, R"(quantile="0\.5")");
  EXPECT_GT(p50, 0.008) << page;
  EXPECT_LT(p50, 0.2) << page;
  EXPECT_GT(series(page, "hvrun_rank_lateness_seconds_sum", 1),
            series(page, "hvrun_rank_lateness_seconds_sum", 0))
      << page;
  EXPECT_GT(series(page, "hvrun_rank_phase_growth_seconds", 1, R"(phase="data")"), 0.008) << page;
  expect_names_rank(hvrun.err(), 1);
}

TEST(StragglerJob, CApiTrainerWithAsyncAllreducesNamesTheSlowRank) {
  // Rank 0 is the slow one here: the attribution follows the data, not a rank number.
  const RunResult r = run_process(
      {bin_path("hvrun"), "--device", "cpu", "-np", "2", "--straggler-warning-ms", "10",
       bin_path("straggler_c_worker"), "0", "20", "60"},
      {.timeout = 60s});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_names_rank(r.err, 0);
}

TEST(StragglerJob, NoWarningWhenNoRankIsSlow) {
  const RunResult r = run_process(
      {bin_path("hvrun"), "--device", "cpu", "-np", "2", "--straggler-warning-ms", "10",
       bin_path("straggler_worker"), "1", "0", "60"},
      {.timeout = 60s});
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(warning_line(r.err)) << r.err;
  // Steps were still attributed; whoever was last, by little.
  const auto summary = summary_line(r.err);
  ASSERT_TRUE(summary) << r.err;
  EXPECT_LT(summary->late_ms, 10.0) << r.err;
}

}  // namespace
}  // namespace hvrun::test
