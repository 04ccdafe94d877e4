// hvrun's end-of-job telemetry summary and the hub that keeps snapshots across attempts.
#include "launcher/telemetry/telemetry_summary.h"

#include <gtest/gtest.h>

#include "launcher/telemetry/telemetry_hub.h"
#include "tests/metrics/sample_telemetry.h"

namespace hvrun::launcher {
namespace {

JobTelemetry plain_sample() {
  JobTelemetry job = test::full_sample_telemetry();
  job.ranks[1].host = "node-b";
  return job;
}

// The same without step timings (no straggler attribution).
JobTelemetry unattributed_sample() {
  JobTelemetry job = plain_sample();
  job.attributed_steps = 0;
  for (coordinator::telemetry::RankTelemetry& r : job.ranks) {
    r.last_steps = 0;
    r.phase_growth.clear();
  }
  return job;
}

TEST(TelemetrySummary, NothingWithoutTelemetry) {
  EXPECT_EQ(format_telemetry_summary({}), "");
  JobTelemetry registered_only;
  registered_only.world_size = 2;
  registered_only.ranks.resize(2);
  EXPECT_FALSE(has_telemetry(registered_only));
  EXPECT_EQ(format_telemetry_summary(registered_only), "");
}

TEST(TelemetrySummary, OneRowPerRankWithTimeBytesAndBandwidth) {
  const std::string text = format_telemetry_summary(plain_sample());
  // Rank 0: 100 MiB in 0.5 s + 1 KiB in 0.25 s -> 0.75 s, 100 MiB, 133.3 MiB/s.
  EXPECT_NE(
      text.find(
          "hvrun: telemetry: job hvrun-1234abcd, 2 ranks, last of 2 attempts, 40 steps (2.50/s)\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("hvrun: 0     node-a"), std::string::npos) << text;
  EXPECT_NE(text.find("0.750 s"), std::string::npos) << text;
  EXPECT_NE(text.find("100.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("133.3 MiB/s"), std::string::npos) << text;
  // Rank 1: 200 MiB in 1.25 s -> 160 MiB/s.
  EXPECT_NE(text.find("160.0 MiB/s"), std::string::npos) << text;
  for (const char* header : {"collectives", "bytes", "bandwidth", "negotiation", "waiting"})
    EXPECT_NE(text.find(header), std::string::npos) << header;
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 7u) << text;  // title, header, 2 ranks, slowest rank, straggler, longest wait
  EXPECT_NE(text.find("hvrun: straggler: rank 1 on node-b was last in 90% of 30 steps, 20.0 ms "
                      "late at the median; its phase \"data\" grew most: 22.5 ms against 2.5 ms "
                      "on the other ranks\n"),
            std::string::npos)
      << text;
  const std::string unattributed = format_telemetry_summary(unattributed_sample());
  EXPECT_EQ(unattributed.find("straggler"), std::string::npos) << unattributed;
}

TEST(TelemetrySummary, NamesTheSlowestRankAndTheLongestWait) {
  const std::string text = format_telemetry_summary(plain_sample());
  EXPECT_NE(
      text.find(
          "hvrun: slowest rank: 1 on node-b (least steps per second: 2.50, the fastest rank 3.00)"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("hvrun: longest wait: tensor 'grad.layer3', rank 0 waited 0.750 s"),
            std::string::npos)
      << text;
}

// A megabyte of generated name is shown as its start and its length, on one short line.
TEST(TelemetrySummary, ALongTensorNameIsShortenedWithItsLength) {
  JobTelemetry job = plain_sample();
  job.ranks[0].longest_wait_tensor = "grad." + std::string(1 << 20, 'x');
  const std::string text = format_telemetry_summary(job);
  const std::string expected =
      "hvrun: longest wait: tensor 'grad." + std::string(59, 'x') + "...' (" +
      std::to_string((1 << 20) + 5) + " bytes), rank 0 waited 0.750 s for the other ranks\n";
  EXPECT_NE(text.find(expected), std::string::npos) << text.substr(0, 2000);
  EXPECT_LT(text.size(), 2000u);
  // Not cut inside a UTF-8 character: 'é' (2 bytes) straddles the cut.
  job.ranks[0].longest_wait_tensor = std::string(63, 'a') + "\xc3\xa9" + std::string(100, 'b');
  EXPECT_NE(format_telemetry_summary(job).find("tensor '" + std::string(63, 'a') + "...' (165 bytes)"),
            std::string::npos);
  job.ranks[0].longest_wait_tensor = std::string(80, 'c');  // up to 80 bytes: whole
  EXPECT_NE(format_telemetry_summary(job).find("tensor '" + std::string(80, 'c') + "', rank 0"),
            std::string::npos);
}

TEST(TelemetrySummary, SlowestRankByStallsThenByWaiting) {
  JobTelemetry job = unattributed_sample();
  job.ranks[0].stalls = 2;
  auto by_stalls = find_slowest_rank(job);
  ASSERT_TRUE(by_stalls);
  EXPECT_EQ(by_stalls->rank, 0);
  EXPECT_EQ(by_stalls->reason, "named missing in 2 stall warning(s)");
  job.ranks[0].stalls = 0;
  job.ranks[0].step_rate = 2.52;  // equal within 5%: the rank the others waited for
  auto by_wait = find_slowest_rank(job);
  ASSERT_TRUE(by_wait);
  EXPECT_EQ(by_wait->rank, 1);  // it waited 0.125 s, rank 0 waited 1.25 s for it
  EXPECT_NE(by_wait->reason.find("the others waited 1.250 s"), std::string::npos)
      << by_wait->reason;
  job.ranks[0].step_rate = 0;  // unknown: the same
  EXPECT_EQ(find_slowest_rank(job)->rank, 1);
  job.ranks.resize(1);
  EXPECT_FALSE(find_slowest_rank(job));
}

TEST(TelemetrySummary, SlowestRankByStepAttributionBeforeNegotiationWaits) {
  JobTelemetry job = plain_sample();
  job.ranks[0].step_rate = 2.52;  // equal within 5%
  job.ranks[1].wait_seconds = 5;  // negotiation alone would name rank 0
  auto slowest = find_slowest_rank(job);
  ASSERT_TRUE(slowest);
  EXPECT_EQ(slowest->rank, 1);
  EXPECT_EQ(slowest->reason, "arrived last in 27 of 30 steps, 20.0 ms late at the median");
}

TEST(TelemetrySummary, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(100.0 * (1 << 20)), "100.0 MiB");
  EXPECT_EQ(format_bytes(3.0 * (1ULL << 40)), "3.00 TiB");
}

TEST(TelemetryHub, LiveSourceThenLastSnapshotWithRestarts) {
  TelemetryHub hub;
  EXPECT_EQ(hub.snapshot().ranks_alive, 0);
  int alive = 3;
  {
    ScopedTelemetrySource source(&hub, [&alive] {
      JobTelemetry job;
      job.ranks_alive = alive;
      return job;
    });
    EXPECT_EQ(hub.snapshot().ranks_alive, 3);
    alive = 2;
    EXPECT_EQ(hub.snapshot().ranks_alive, 2);
    alive = 1;  // the attempt's final state is taken when it detaches
  }
  alive = 99;  // no longer read
  hub.set_restarts(4);
  JobTelemetry after = hub.snapshot();
  EXPECT_EQ(after.ranks_alive, 1);
  EXPECT_EQ(after.restarts, 4);
  ScopedTelemetrySource none(nullptr, [] { return JobTelemetry{}; });  // no hub: nothing happens
}

}  // namespace
}  // namespace hvrun::launcher
