// Straggler attribution's parts without a job: the coordinator's tracker (which rank was last
// and by how much, quantiles, which phase grew, the warning rule), the aggregator taking step
// timings from reports, the worker's step timer (phases' busy time less blocked time), and
// what /metrics and the end-of-job summary make of it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/metrics/job_metrics.h"
#include "coordinator/telemetry/aggregator.h"
#include "coordinator/telemetry/straggler_tracker.h"
#include "launcher/telemetry/telemetry_summary.h"
#include "worker_lib/blocked_time.h"
#include "worker_lib/telemetry/step_timer.h"

namespace hvrun::coordinator::telemetry {
namespace {

using namespace std::chrono_literals;
using Clock = StragglerTracker::Clock;

constexpr uint64_t kMs = 1'000'000;  // ns

v1::StepTiming timing(uint64_t step, uint64_t blocked_ms,
                      std::vector<std::pair<std::string, uint64_t>> phases_ms = {}) {
  v1::StepTiming t;
  t.set_step(step);
  t.set_duration_ns(30 * kMs);
  t.set_blocked_ns(blocked_ms * kMs);
  for (const auto& [name, ms] : phases_ms) {
    v1::StepPhaseTime* p = t.add_phases();
    p->set_name(name);
    p->set_busy_ns(ms * kMs);
  }
  return t;
}

JobTelemetry job_of(int ranks) {
  JobTelemetry job;
  job.world_size = ranks;
  for (int r = 0; r < ranks; ++r) {
    RankTelemetry t;
    t.rank = r;
    t.host = "host-" + std::to_string(r);
    job.ranks.push_back(t);
  }
  return job;
}

// Rank 2 of 3 spends 20 ms more in "data"; the others block for it.
void slow_rank_two(StragglerTracker& tracker, uint64_t step, Clock::time_point now,
                   std::vector<std::string>* warnings) {
  for (int r = 0; r < 3; ++r) {
    const bool slow = r == 2;
    auto w = tracker.add(r,
                         timing(step, slow ? 1 : 21 + static_cast<uint64_t>(r),
                                {{"data", slow ? 22 : 2}, {"forward", 5}}),
                         now);
    if (w && warnings) warnings->push_back(*w);
  }
}

// A step in which every rank waited as long: rank 0 comes last by nothing.
void even_step(StragglerTracker& tracker, uint64_t step, Clock::time_point now) {
  for (int r = 0; r < 3; ++r) tracker.add(r, timing(step, 5), now);
}

TEST(StragglerReplacement, NamesARankLateInMostOfTheWindowOnceTheWindowIsFull) {
  StragglerTracker tracker(3, 0us, ReplacementRule{.threshold = 10ms, .window = 10});
  tracker.set_host(2, "slowhost");
  const auto now = Clock::now();
  for (uint64_t step = 1; step <= 9; ++step) {
    slow_rank_two(tracker, step, now, nullptr);
    EXPECT_FALSE(tracker.replaceable()) << "step " << step << ": the window is not full yet";
  }
  slow_rank_two(tracker, 10, now, nullptr);
  ASSERT_TRUE(tracker.replaceable());
  EXPECT_EQ(tracker.replaceable()->rank, 2);
  EXPECT_EQ(tracker.replaceable()->host, "slowhost");
  EXPECT_EQ(tracker.replaceable()->late_steps, 10);
  EXPECT_EQ(tracker.replaceable()->window, 10);
  EXPECT_NEAR(tracker.replaceable()->lateness_median_seconds, 0.021, 1e-9);
  EXPECT_NEAR(tracker.replaceable()->threshold_seconds, 0.010, 1e-12);
  JobTelemetry job = job_of(3);
  tracker.fill(job);
  ASSERT_TRUE(job.replaceable_straggler);
  EXPECT_EQ(job.replaceable_straggler->rank, 2);
}

TEST(StragglerReplacement, HalfTheWindowIsNotMost) {
  StragglerTracker tracker(3, 0us, ReplacementRule{.threshold = 10ms, .window = 10});
  const auto now = Clock::now();
  uint64_t step = 0;
  for (int k = 0; k < 5; ++k) {
    even_step(tracker, ++step, now);
    slow_rank_two(tracker, ++step, now, nullptr);
  }
  EXPECT_FALSE(tracker.replaceable()) << "5 of 10 late steps";
  // The window slides: one more late step in place of an even one makes 6 of the last 10.
  slow_rank_two(tracker, ++step, now, nullptr);
  ASSERT_TRUE(tracker.replaceable());
  EXPECT_EQ(tracker.replaceable()->late_steps, 6);
  // And back to 5 of 10 once the oldest late steps slide out.
  even_step(tracker, ++step, now);
  EXPECT_FALSE(tracker.replaceable());
}

TEST(StragglerReplacement, LateByLessThanTheThresholdIsNeverReplaced) {
  // Rank 2 is last in every step, by 21 ms: under a 22 ms threshold that never counts.
  StragglerTracker tracker(3, 0us, ReplacementRule{.threshold = 22ms, .window = 10});
  const auto now = Clock::now();
  for (uint64_t step = 1; step <= 50; ++step) slow_rank_two(tracker, step, now, nullptr);
  EXPECT_FALSE(tracker.replaceable());
}

TEST(StragglerReplacement, NoWindowNeverReplacesAndANewMembershipStartsAfresh) {
  StragglerTracker off(3, 0us);
  const auto now = Clock::now();
  for (uint64_t step = 1; step <= 50; ++step) slow_rank_two(off, step, now, nullptr);
  EXPECT_FALSE(off.replaceable());
  JobTelemetry job = job_of(3);
  off.fill(job);
  EXPECT_FALSE(job.replaceable_straggler);

  StragglerTracker on(3, 0us, ReplacementRule{.threshold = 10ms, .window = 10});
  for (uint64_t step = 1; step <= 10; ++step) slow_rank_two(on, step, now, nullptr);
  ASSERT_TRUE(on.replaceable());
  on.reset_membership(3);
  EXPECT_FALSE(on.replaceable());
  for (uint64_t step = 1; step <= 9; ++step) slow_rank_two(on, step, now, nullptr);
  EXPECT_FALSE(on.replaceable()) << "the new membership's window is not full yet";
  slow_rank_two(on, 10, now, nullptr);
  EXPECT_TRUE(on.replaceable());
}

TEST(StragglerTracker, NamesTheRankThatBlockedLeastAndHowLateItWas) {
  StragglerTracker tracker(3, 0us);
  const auto now = Clock::now();
  for (uint64_t step = 1; step <= 20; ++step) slow_rank_two(tracker, step, now, nullptr);
  JobTelemetry job = job_of(3);
  tracker.fill(job);
  EXPECT_EQ(job.attributed_steps, 20u);
  EXPECT_EQ(job.ranks[2].last_steps, 20u);
  EXPECT_EQ(job.ranks[0].last_steps, 0u);
  // Lateness = the most blocked (rank 1: 22 ms) less its own.
  EXPECT_NEAR(job.ranks[2].lateness_p50_seconds, 0.021, 1e-9);
  EXPECT_NEAR(job.ranks[2].last_lateness_median_seconds, 0.021, 1e-9);
  EXPECT_NEAR(job.ranks[0].lateness_p50_seconds, 0.001, 1e-9);
  EXPECT_NEAR(job.ranks[1].lateness_p99_seconds, 0.0, 1e-9);
  EXPECT_NEAR(job.ranks[2].lateness_seconds, 20 * 0.021, 1e-9);
  ASSERT_EQ(job.ranks[2].phase_growth.size(), 2u);
  EXPECT_EQ(job.ranks[2].phase_growth[0].phase, "data");
  EXPECT_NEAR(job.ranks[2].phase_growth[0].seconds, 0.022, 1e-9);
  EXPECT_NEAR(job.ranks[2].phase_growth[0].others_seconds, 0.002, 1e-9);
  EXPECT_NEAR(job.ranks[2].phase_growth[1].growth(), 0.0, 1e-9);
}

TEST(StragglerTracker, WaitsForEveryRanksTimingInAnyOrder) {
  StragglerTracker tracker(2, 0us);
  const auto now = Clock::now();
  for (uint64_t step = 1; step <= 5; ++step) tracker.add(0, timing(step, 10), now);
  JobTelemetry job = job_of(2);
  tracker.fill(job);
  EXPECT_EQ(job.attributed_steps, 0u);
  for (uint64_t step = 1; step <= 5; ++step) tracker.add(1, timing(step, 2), now);
  tracker.fill(job);
  EXPECT_EQ(job.attributed_steps, 5u);
  EXPECT_EQ(job.ranks[1].last_steps, 5u);
  EXPECT_NEAR(job.ranks[1].lateness_p50_seconds, 0.008, 1e-9);
}

// Elastic: after a membership of 3 shrinks to 2, the survivors' steps (numbered afresh) are
// attributed without waiting for the lost rank, and a step the lost rank never finished is
// dropped.
TEST(StragglerTracker, ANewMembershipMatchesStepsAmongItsOwnRanks) {
  StragglerTracker tracker(3, 0us);
  const auto now = Clock::now();
  tracker.add(0, timing(1, 10), now);
  tracker.add(1, timing(1, 12), now);  // rank 2 is lost before reporting step 1
  tracker.reset_membership(2);
  for (uint64_t step = 1; step <= 4; ++step) {
    tracker.add(0, timing(step, 9), now);
    tracker.add(1, timing(step, 1), now);
  }
  JobTelemetry job = job_of(3);
  tracker.fill(job);
  EXPECT_EQ(job.attributed_steps, 4u);
  EXPECT_EQ(job.ranks[1].last_steps, 4u);
  EXPECT_NEAR(job.ranks[1].lateness_p50_seconds, 0.008, 1e-9);
}

TEST(StragglerTracker, AStepNobodyWaitedInIsNotAttributed) {
  StragglerTracker tracker(2, 0us);
  const auto now = Clock::now();
  tracker.add(0, timing(1, 0), now);
  tracker.add(1, timing(1, 0), now);
  JobTelemetry job = job_of(2);
  tracker.fill(job);
  EXPECT_EQ(job.attributed_steps, 0u);
  EXPECT_EQ(job.ranks[0].last_steps, 0u);
}

TEST(StragglerTracker, StepsARankNeverReportsAreGivenUpBounded) {
  StragglerTracker tracker(2, 0us);
  const auto now = Clock::now();
  for (uint64_t step = 1; step <= 1000; ++step) tracker.add(0, timing(step, 3), now);
  tracker.add(1, timing(1000, 1), now);  // the oldest were given up; the newest still waits
  JobTelemetry job = job_of(2);
  tracker.fill(job);
  EXPECT_EQ(job.attributed_steps, 1u);
  tracker.add(1, timing(1, 1), now);  // long given up: waits alone, attributes nothing
  tracker.fill(job);
  EXPECT_EQ(job.attributed_steps, 1u);
}

TEST(StragglerTracker, WarnsWhenOneRankIsLateInMostRecentStepsNamingThePhaseThatGrew) {
  StragglerTracker tracker(3, 10ms);
  tracker.set_host(2, "host-c");
  const auto start = Clock::now();
  std::vector<std::string> warnings;
  for (uint64_t step = 1; step <= 9; ++step) slow_rank_two(tracker, step, start, &warnings);
  EXPECT_TRUE(warnings.empty());  // fewer than 10 steps seen
  slow_rank_two(tracker, 10, start, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "rank 2 on host-c was last by 10.0 ms or more in 10 of the last 10 steps, 21.0 ms "
            "late at the median; its phase \"data\" grew most: 22.0 ms against 2.0 ms on the "
            "other ranks");
  // At most every 10 s for the same rank.
  for (uint64_t step = 11; step <= 30; ++step) slow_rank_two(tracker, step, start + 5s, &warnings);
  EXPECT_EQ(warnings.size(), 1u);
  slow_rank_two(tracker, 31, start + 11s, &warnings);
  EXPECT_EQ(warnings.size(), 2u);
}

TEST(StragglerTracker, NoWarningBelowTheThresholdOrWhenLatenessMovesAround) {
  StragglerTracker tracker(2, 10ms);
  const auto now = Clock::now();
  std::vector<std::string> warnings;
  for (uint64_t step = 1; step <= 40; ++step) {
    // 5 ms late (under the threshold) on odd steps; 30 ms late on every fourth for rank 1 only.
    const bool big = step % 4 == 0;
    for (int r = 0; r < 2; ++r) {
      const bool late = (step % 2 == 0) == (r == 1);
      if (auto w = tracker.add(r, timing(step, late ? 1 : (big ? 31 : 6)), now))
        warnings.push_back(*w);
    }
  }
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  JobTelemetry job = job_of(2);
  tracker.fill(job);
  EXPECT_EQ(job.ranks[0].last_steps, 20u);
  EXPECT_EQ(job.ranks[1].last_steps, 20u);
}

TEST(StragglerAggregator, TakesStepTimingsFromReportsIntoTheSnapshot) {
  Aggregator agg({.job_id = "job", .world_size = 2, .straggler_warning = 10ms});
  agg.on_attached(0, nullptr, "host-a", 0);
  agg.on_attached(1, nullptr, "host-b", 1);
  v1::TelemetryReport fast, slow;
  for (uint64_t step = 1; step <= 12; ++step) {
    *fast.add_step_timings() = timing(step, 25, {{"data", 2}});
    *slow.add_step_timings() = timing(step, 4, {{"data", 24}});
  }
  agg.on_report(0, fast);
  agg.on_report(1, slow);
  const JobTelemetry job = agg.snapshot();
  EXPECT_EQ(job.attributed_steps, 12u);
  EXPECT_EQ(job.ranks[1].last_steps, 12u);
  EXPECT_NEAR(job.ranks[1].last_lateness_median_seconds, 0.021, 1e-9);
  ASSERT_FALSE(job.ranks[1].phase_growth.empty());
  EXPECT_EQ(job.ranks[1].phase_growth[0].phase, "data");

  EXPECT_EQ(launcher::describe_straggler(job),
            "rank 1 on host-b was last in 100% of 12 steps, 21.0 ms late at the median; its "
            "phase \"data\" grew most: 24.0 ms against 2.0 ms on the other ranks");
  const auto slowest = launcher::find_slowest_rank(job);
  ASSERT_TRUE(slowest);
  EXPECT_EQ(slowest->rank, 1);
  EXPECT_EQ(slowest->reason, "arrived last in 12 of 12 steps, 21.0 ms late at the median");

  const std::string page = metrics::render_metrics(job);
  EXPECT_NE(page.find("hvrun_rank_last_steps_total{rank=\"1\",host=\"host-b\",local_rank=\"1\"} "
                      "12\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("hvrun_rank_lateness_seconds{rank=\"1\",host=\"host-b\",local_rank=\"1\","
                      "quantile=\"0.5\"} 0.021\n"),
            std::string::npos)
      << page;
  const std::string growth =
      "hvrun_rank_phase_growth_seconds{rank=\"1\",host=\"host-b\",local_rank=\"1\","
      "phase=\"data\"} ";
  const size_t at = page.find(growth);
  ASSERT_NE(at, std::string::npos) << page;
  EXPECT_NEAR(std::stod(page.substr(at + growth.size())), 0.022, 1e-9) << page;
  EXPECT_NE(page.find("\nhvrun_straggler_attributed_steps_total 12\n"), std::string::npos) << page;
  EXPECT_NE(page.find("# TYPE hvrun_rank_lateness_seconds summary\n"), std::string::npos) << page;
  EXPECT_NE(page.find("hvrun_rank_lateness_seconds_count{rank=\"0\",host=\"host-a\",local_rank="
                      "\"0\"} 12\n"),
            std::string::npos)
      << page;
}

TEST(StragglerSummary, NoLineWithoutAttributedSteps) {
  EXPECT_EQ(launcher::describe_straggler(job_of(2)), "");
  const std::string page = metrics::render_metrics(job_of(2));
  EXPECT_EQ(page.find("hvrun_rank_lateness_seconds{"), std::string::npos) << page;
}

}  // namespace
}  // namespace hvrun::coordinator::telemetry

namespace hvrun::detail::telemetry {
namespace {

using namespace std::chrono_literals;

TEST(StepTimer, PhasesCountTheirBusyTimeLessTheTimeBlockedInside) {
  BlockedTime blocked;
  StepTimer timer(blocked);
  timer.mark_phase("data");
  std::this_thread::sleep_for(5ms);
  timer.mark_phase("backward");
  const auto start = BlockedTime::Clock::now();
  std::this_thread::sleep_for(4ms);
  blocked.add(start, start + 3ms);  // as a wait inside the phase would
  timer.mark_phase("data");         // the same name again adds up
  std::this_thread::sleep_for(1ms);
  timer.mark_phase("");  // nothing runs until the step ends
  std::this_thread::sleep_for(2ms);
  timer.mark_step();
  timer.mark_phase("forward");
  timer.mark_step();

  v1::TelemetryReport report;
  timer.take(report);
  ASSERT_EQ(report.step_timings_size(), 2);
  const v1::StepTiming& first = report.step_timings(0);
  EXPECT_EQ(first.step(), 1u);
  EXPECT_EQ(first.blocked_ns(), 3'000'000u);
  EXPECT_GE(first.duration_ns(), 12'000'000u);
  ASSERT_EQ(first.phases_size(), 2);
  EXPECT_EQ(first.phases(0).name(), "data");
  EXPECT_GE(first.phases(0).busy_ns(), 6'000'000u);
  EXPECT_EQ(first.phases(1).name(), "backward");
  EXPECT_GE(first.phases(1).busy_ns(), 1'000'000u);
  EXPECT_LE(first.phases(1).busy_ns() + 3'000'000u + first.phases(0).busy_ns(),
            first.duration_ns());
  const v1::StepTiming& second = report.step_timings(1);
  EXPECT_EQ(second.step(), 2u);
  EXPECT_EQ(second.blocked_ns(), 0u);
  ASSERT_EQ(second.phases_size(), 1);
  EXPECT_EQ(second.phases(0).name(), "forward");
  EXPECT_FALSE(timer.has_pending());
}

TEST(StepTimer, KeepsTheNewestStepsWhenNobodyTakesThem) {
  BlockedTime blocked;
  StepTimer timer(blocked, 3);
  for (int i = 0; i < 5; ++i) timer.mark_step();
  EXPECT_TRUE(timer.has_pending());
  v1::TelemetryReport report;
  timer.take(report);
  ASSERT_EQ(report.step_timings_size(), 3);
  EXPECT_EQ(report.step_timings(0).step(), 3u);
  EXPECT_EQ(report.step_timings(2).step(), 5u);
  EXPECT_EQ(report.step_timings_dropped(), 2u);
}

}  // namespace
}  // namespace hvrun::detail::telemetry
