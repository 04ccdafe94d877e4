// The cached rounds (worker_lib/agreement/cached_rounds.h): asynchronous allreduces of negotiated
// tensors on a single-host shared-memory job run through rounds the ranks agree on among
// themselves, with the coordinator's bits, and the coordinator sees no request for them; what
// does not agree (ranks submitting in different orders, a late rank, a mismatch, a join) goes
// through the coordinator with correct results. Real jobs: in-process coordinator, worker
// processes (tests/support/worker_job.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>

#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

std::vector<std::string> worker(const std::string& mode) {
  return {bin_path("hvrun_cached_rounds_worker"), mode};
}

std::string counts(const JobResult& job) {
  std::string text = "coordinator plans " + std::to_string(job.plans) + "; per rank: negotiated";
  for (uint64_t n : job.tensors_negotiated) text += " " + std::to_string(n);
  text += ", fused responses run by agreement";
  for (uint64_t n : job.fast_path_collectives) text += " " + std::to_string(n);
  return text;
}

// Every rank's "digest <hex>" line, in rank order.
std::vector<std::string> digests(const JobResult& job) {
  std::vector<std::string> found;
  const std::regex line("digest ([0-9a-f]{16})");
  for (const auto& rank : job.ranks) {
    std::smatch m;
    found.push_back(std::regex_search(rank.out, m, line) ? m[1].str() : "none");
  }
  return found;
}

// The same worker with ranks alternating between two simulated hosts (HVRUN_HOST): the
// hierarchical data plane, whose rounds cross hosts
// (worker_lib/agreement/host_rounds/host_rounds.h).
std::vector<std::string> worker_on_two_hosts(const std::string& mode) {
  return on_two_simulated_hosts(worker(mode));
}

// The steady state's results, bit for bit, through the coordinator (the cached rounds off).
std::string coordinator_digest(int np, bool two_hosts = false) {
  JobResult job = run_job(np, two_hosts ? worker_on_two_hosts("steady") : worker("steady"),
                          {.timeout = std::chrono::seconds(120),
                           .extra_env = {{"HVRUN_FAST_PATH", "false"}}});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
  for (int r = 0; r < np; ++r) {
    // 40 steps of 6 tensors, every one negotiated.
    EXPECT_EQ(job.tensors_negotiated[static_cast<size_t>(r)], 240u) << counts(job);
    EXPECT_EQ(job.fast_path_collectives[static_cast<size_t>(r)], 0u) << counts(job);
  }
  const auto d = digests(job);
  for (const auto& one : d) EXPECT_EQ(one, d[0]) << job.describe();
  return d[0];
}

TEST(CachedRounds, SteadyStateSkipsTheCoordinatorWithItsBits) {
  for (int np : {2, 3}) {
    const std::string reference = coordinator_digest(np);
    JobResult job = run_job(np, worker("steady"), {.timeout = std::chrono::seconds(120)});
    ASSERT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
    std::printf("np %d: %s\n", np, counts(job).c_str());
    for (const auto& d : digests(job)) EXPECT_EQ(d, reference) << "np " << np;
    // 2 ranks: the first step is negotiated (6 tensors); a later step reaches the coordinator
    // only when a rank was descheduled past the 50 ms wait. Through the coordinator every step
    // would be: 240. (3 ranks on a loaded 2-core host fall back far more often, from 0 to all
    // steps: only their bits are checked here.)
    for (int r = 0; np == 2 && r < np; ++r) {
      const auto rank = static_cast<size_t>(r);
      EXPECT_LE(job.tensors_negotiated[rank], 6u + 240u / 2) << "np " << np << "; " << counts(job);
      EXPECT_GE(job.fast_path_collectives[rank], 20u) << "np " << np << "; " << counts(job);
    }
  }
}

TEST(CachedRounds, AcrossHostsTheSteadyStateSkipsTheCoordinatorWithItsBits) {
  // 3 ranks: a host of two (its shm board) and a host of one; 4 ranks: two hosts of two. A
  // round waits up to 2 s here, so that ranks descheduled on this loaded 2-core machine still
  // meet: the point is that rounds cross hosts, not how often they miss.
  for (int np : {3, 4}) {
    const std::string reference = coordinator_digest(np, true);
    JobResult job = run_job(np, worker_on_two_hosts("steady"),
                            {.timeout = std::chrono::seconds(120),
                             .extra_env = {{"HVRUN_FAST_PATH_WAIT_MS", "2000"},
                                           {"HVRUN_LOG_LEVEL", "debug"}}});
    ASSERT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
    // Allreduces only: the Gloo mesh of every rank (N^2 connections) is never connected.
    for (const auto& rank : job.ranks)
      EXPECT_EQ(rank.err.find("connecting the Gloo mesh of every rank"), std::string::npos);
    std::printf("np %d on two hosts: %s\n", np, counts(job).c_str());
    for (const auto& d : digests(job)) EXPECT_EQ(d, reference) << "np " << np;
    // The first step is negotiated; of the 39 others at most 10 may reach the coordinator
    // (every step of them would: 240 tensors), and each step by agreement is 4 responses.
    for (int r = 0; r < np; ++r) {
      const auto rank = static_cast<size_t>(r);
      EXPECT_LE(job.tensors_negotiated[rank], 6u + 60u) << "np " << np << "; " << counts(job);
      EXPECT_GE(job.fast_path_collectives[rank], 4u * 29) << "np " << np << "; " << counts(job);
    }
  }
}

TEST(CachedRounds, AcrossHostsOnGlooAloneEveryRankSpeaksForItself) {
  // 2 ranks: one per host, so Gloo by default; 4 ranks: hierarchical off. No board to meet on:
  // every rank reports to the arbiter itself.
  for (int np : {2, 4}) {
    JobResult off = run_job(np, worker_on_two_hosts("steady"),
                            {.timeout = std::chrono::seconds(120),
                             .extra_env = {{"HVRUN_HIERARCHICAL_ALLREDUCE", "off"},
                                           {"HVRUN_FAST_PATH", "false"}}});
    ASSERT_TRUE(off.all_succeeded()) << off.describe();
    const std::string reference = digests(off)[0];
    JobResult job = run_job(np, worker_on_two_hosts("steady"),
                            {.timeout = std::chrono::seconds(120),
                             .extra_env = {{"HVRUN_HIERARCHICAL_ALLREDUCE", "off"},
                                           {"HVRUN_FAST_PATH_WAIT_MS", "2000"},
                                           {"HVRUN_LOG_LEVEL", "debug"}}});
    ASSERT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
    std::printf("np %d on two hosts, Gloo: %s\n", np, counts(job).c_str());
    EXPECT_NE(job.ranks[0].err.find("CPU data plane: gloo"), std::string::npos);
    // Every rank holds the same bits (each result is also checked against a reference by the
    // worker). Gloo's ring sums a fused buffer's elements in an order that depends on where they
    // lie in it, so over more than 2 ranks the bits follow the fusion, which through the
    // coordinator follows arrival times: only 2 ranks can be compared with its run.
    const auto d = digests(job);
    for (const auto& one : d) EXPECT_EQ(one, d[0]) << "np " << np;
    if (np == 2) {
      EXPECT_EQ(d[0], reference);
    }
    for (int r = 0; r < np; ++r) {
      const auto rank = static_cast<size_t>(r);
      EXPECT_LE(job.tensors_negotiated[rank], 6u + 60u) << "np " << np << "; " << counts(job);
      EXPECT_GE(job.fast_path_collectives[rank], 4u * 29) << "np " << np << "; " << counts(job);
    }
  }
}

TEST(CachedRounds, AcrossHostsRanksSubmittingInTheirOwnOrderGetTheSameBits) {
  const std::string reference = coordinator_digest(4, true);
  JobResult job = run_job(4, worker_on_two_hosts("order"), {.timeout = std::chrono::seconds(120)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  std::printf("on two hosts: %s\n", counts(job).c_str());
  for (const auto& d : digests(job)) EXPECT_EQ(d, reference);
}

TEST(CachedRounds, AcrossHostsALateSpeakerSendsThoseStepsThroughTheCoordinator) {
  // Rank 1 speaks for the second host; 30 ms late every 4th step against a 2 ms wait, it makes
  // the arbiter fail those rounds, and every rank sends those steps to the coordinator.
  JobResult job = run_job(4, worker_on_two_hosts("late"), {.timeout = std::chrono::seconds(90)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  std::printf("on two hosts: %s\n", counts(job).c_str());
  for (int r = 0; r < 4; ++r)
    EXPECT_GT(job.tensors_negotiated[static_cast<size_t>(r)], 6u) << counts(job);
}

TEST(CachedRounds, AcrossHostsJoinedRanksContributeNothingThroughTheCoordinator) {
  JobResult job = run_job(4, worker_on_two_hosts("join"), {.timeout = std::chrono::seconds(90)});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
  std::printf("on two hosts: %s\n", counts(job).c_str());
  EXPECT_GE(job.tensors_negotiated[0], 6u + 60u) << counts(job);
}

TEST(CachedRounds, RanksSubmittingInTheirOwnOrderGetTheSameBits) {
  const std::string reference = coordinator_digest(3);
  JobResult job = run_job(3, worker("order"), {.timeout = std::chrono::seconds(120)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  std::printf("%s\n", counts(job).c_str());
  for (const auto& d : digests(job)) EXPECT_EQ(d, reference);
}

// A two-rank job of `mode` with that cycle time: every rank succeeded, only the first steps
// were negotiated, and at least `agreed` fused responses per rank ran by agreement.
JobResult run_gathering_job(const std::string& mode, std::chrono::milliseconds cycle,
                            uint64_t agreed) {
  JobResult job = run_job(2, worker(mode), {.timeout = std::chrono::seconds(90),
                                            .cycle_time = cycle});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
  std::printf("%s\n", counts(job).c_str());
  for (size_t rank = 0; rank < job.tensors_negotiated.size(); ++rank) {
    // The first step is negotiated; a step may reach the coordinator when a rank was
    // descheduled past the round's 50 ms wait.
    EXPECT_LE(job.tensors_negotiated[rank], 6u * 4) << counts(job);
    EXPECT_GE(job.fast_path_collectives[rank], agreed) << counts(job);
  }
  return job;
}

TEST(CachedRounds, SubmissionsGatherForTheCycleTimeIntoFusedResponses) {
  // Each step's six tensors come 300 us apart and nobody waits for 5 ms after the last: the
  // background thread runs them. With a 20 ms cycle it lets the whole step gather, so a step is
  // four fused responses (three float32 sums share one), as the coordinator would fuse them;
  // taking each submission as it came would make six.
  JobResult job = run_gathering_job("spaced", std::chrono::milliseconds(20), 4u * 20);
  for (uint64_t n : job.fast_path_collectives) EXPECT_LE(n, 4u * 29 + 6) << counts(job);
}

TEST(CachedRounds, ABatchNobodyWaitsForRunsACycleAfterItsFirstSubmission) {
  // The ranks only poll their handles: nothing takes a step's batch but the background thread,
  // which sleeps between batches and is woken by the batch's timer, a cycle (5 ms) after the
  // first submission. Every step completes (the worker gives each 10 s), by agreement.
  run_gathering_job("polled", std::chrono::milliseconds(5), 4u * 20);
}

TEST(CachedRounds, LateRankSendsThoseStepsThroughTheCoordinator) {
  JobResult job = run_job(2, worker("late"), {.timeout = std::chrono::seconds(90)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  std::printf("%s\n", counts(job).c_str());
  // Six steps with rank 1 30 ms late against a 2 ms wait: rank 0 gives those rounds up, so the
  // coordinator negotiates more than the first step; the punctual steps run by agreement.
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(job.tensors_negotiated[static_cast<size_t>(r)], 6u) << counts(job);
    EXPECT_GT(job.fast_path_collectives[static_cast<size_t>(r)], 0u) << counts(job);
  }
}

TEST(CachedRounds, MismatchOnACachedTensorIsTheCoordinatorsError) {
  JobResult job = run_job(2, worker("mismatch"), {.timeout = std::chrono::seconds(90)});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
  std::printf("%s\n", counts(job).c_str());
}

TEST(CachedRounds, JoinedRanksContributeNothingThroughTheCoordinator) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, worker("join"), {.timeout = std::chrono::seconds(90)});
    EXPECT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
    std::printf("np %d: %s\n", np, counts(job).c_str());
    // Rank 0's 10 steps after the others joined: every tensor through the coordinator.
    EXPECT_GE(job.tensors_negotiated[0], 6u + 60u) << counts(job);
  }
}

}  // namespace
}  // namespace hvrun::test
