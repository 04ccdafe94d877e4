// The fast path (worker_lib/agreement/fast_path.h): blocking allreduces of negotiated tensors run
// without the coordinator, on one host and across (simulated) hosts, and whatever does not fit
// (other ops in flight, threads meeting in different orders, reshapes, late ranks, a rank with
// the fast path off, joins, a dying rank) goes through the coordinator with the same results.
// Real jobs: in-process coordinator, worker processes (tests/support/worker_job.h).
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

std::vector<std::string> worker(const std::string& mode) {
  return {bin_path("hvrun_fast_path_worker"), mode};
}

std::string fast_counts(const JobResult& job) {
  std::string text = "fast-path collectives per rank:";
  for (uint64_t n : job.fast_path_collectives) text += " " + std::to_string(n);
  return text;
}

// The "dtypes" worker's job (it checks every result against its reference): every rank
// succeeded, and most calls ran fast. 38 dtype/op pairs x 5 sizes + 9 scaled, 12 calls each:
// the first of each is negotiated, the other 11 can run fast. A rank descheduled past the
// round's wait sends a call to the coordinator now and then.
void expect_every_dtype_fast(int np, const std::vector<std::string>& argv, const JobOptions& options,
                             const char* where) {
  JobResult job = run_job(np, argv, options);
  ASSERT_TRUE(job.all_succeeded()) << "np " << np << where << "\n" << job.describe();
  const uint64_t possible = (38 * 5 + 9) * 11;
  std::printf("np %d%s: %s of %llu possible\n", np, where, fast_counts(job).c_str(),
              static_cast<unsigned long long>(possible));
  for (int r = 0; r < np; ++r)
    EXPECT_GE(job.fast_path_collectives[static_cast<size_t>(r)], possible * 8 / 10)
        << "np " << np << where << " rank " << r << "; " << fast_counts(job);
}

TEST(FastPath, EveryDtypeOpAndSizeMatchesTheReferenceAndTakesTheFastPath) {
  for (int np : {2, 3})
    expect_every_dtype_fast(np, worker("dtypes"), {.timeout = std::chrono::seconds(120)}, "");
}

TEST(FastPath, InterleavedWithAsyncBroadcastBarrierAndAllgatherStaysCorrect) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, worker("mixed"), {.timeout = std::chrono::seconds(90)});
    ASSERT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
    EXPECT_GT(job.fast_path_collectives[0], 0u) << fast_counts(job);
    std::printf("np %d: %s\n", np, fast_counts(job).c_str());
  }
}

TEST(FastPath, ThreadsMeetingInDifferentOrdersFallBackWithCorrectResults) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, worker("threads"), {.timeout = std::chrono::seconds(120)});
    EXPECT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
  }
}

TEST(FastPath, ReshapedTensorGoesThroughTheCoordinator) {
  JobResult job = run_job(2, worker("reshape"), {.timeout = std::chrono::seconds(60)});
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  for (int r = 0; r < 2; ++r) {
    const auto rank = static_cast<size_t>(r);
    // Only the steady tensor (64 bytes a call) may have run fast; any call of the reshaped one
    // (4 to 12 bytes) would bring the fast path's bytes below 64 per collective.
    EXPECT_GT(job.fast_path_collectives[rank], 0u) << "rank " << r << ": " << fast_counts(job);
    EXPECT_EQ(job.fast_path_bytes[rank], 64 * job.fast_path_collectives[rank])
        << "rank " << r << ": the reshaped tensor ran on the fast path; " << fast_counts(job);
  }
}

TEST(FastPath, LateRankMakesTheOthersFallBackAtTheirDeadline) {
  JobResult job = run_job(2, worker("skew"), {.timeout = std::chrono::seconds(60)});
  // The worker checks that no call of rank 0 took much longer than rank 1's lateness.
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  // 40 calls, every 4th with rank 1 late by fifty times the 2 ms wait: rank 0 gives up on those
  // rounds at its deadline, long before rank 1 comes, so at most the 30 others ran fast. A rank
  // that waited past its deadline would meet its late peer and run those 10 fast too.
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(job.fast_path_collectives[static_cast<size_t>(r)], 0u) << fast_counts(job);
    EXPECT_LE(job.fast_path_collectives[static_cast<size_t>(r)], 30u) << fast_counts(job);
  }
}

TEST(FastPath, RankWithTheFastPathOffNeverMakesOthersWait) {
  JobResult job = run_job(2, worker("mixed-setting"), {.timeout = std::chrono::seconds(60)});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_EQ(job.fast_path_collectives[0], 0u) << fast_counts(job);
  EXPECT_EQ(job.fast_path_collectives[1], 0u) << fast_counts(job);
}

TEST(FastPath, JoinedRanksContributeNeutralDataThroughTheCoordinator) {
  for (int np : {2, 3}) {
    JobResult job = run_job(np, worker("join"), {.timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
  }
}

TEST(FastPath, PeerThatShutDownIsNotWaitedFor) {
  JobResult job = run_job(2, worker("peer-leaves"), {.timeout = std::chrono::seconds(60)});
  EXPECT_TRUE(job.all_succeeded()) << job.describe();
}

// The "abort" worker's two-rank job: rank 1 kills itself (SIGKILL) mid-run, and rank 0's next
// call fails promptly (the worker says so) instead of waiting in a round.
void expect_dying_rank_fails_the_peer(const std::vector<std::string>& argv) {
  JobResult job = run_job(2, argv, {.timeout = std::chrono::seconds(60)});
  ASSERT_EQ(job.ranks.size(), 2u);
  EXPECT_EQ(job.ranks[1].exit_code, 128 + 9) << job.describe();
  EXPECT_EQ(job.ranks[0].exit_code, 0) << job.describe();
  EXPECT_NE(job.ranks[0].out.find("failed as expected"), std::string::npos) << job.describe();
  std::printf("%s", job.ranks[0].out.c_str());
}

TEST(FastPath, RankDyingMidRunFailsThePeersNextCallPromptly) {
  expect_dying_rank_fails_the_peer(worker("abort"));
}

// Across hosts: ranks alternate between two simulated hosts, so the job's round agreement is
// the cross-host one (a board per host joined by the round arbiter; every rank its own speaker
// when each host has one rank, on Gloo alone). Only the agreement crosses hosts: every agreed
// call moves its data through the data plane (hierarchical, or Gloo).
std::vector<std::string> worker_on_two_hosts(const std::string& mode) {
  return on_two_simulated_hosts(worker(mode));
}

TEST(FastPath, AcrossHostsEveryDtypeOpAndSizeMatchesTheReferenceAndTakesTheFastPath) {
  // A round waits up to 2 s, so that ranks descheduled on this loaded 2-core machine still meet.
  for (int np : {2, 3, 4})
    expect_every_dtype_fast(np, worker_on_two_hosts("dtypes"),
                            {.timeout = std::chrono::seconds(120),
                             .extra_env = {{"HVRUN_FAST_PATH_WAIT_MS", "2000"}}},
                            " on two hosts");
}

TEST(FastPath, AcrossHostsInterleavedWithOtherCollectivesStaysCorrect) {
  for (int np : {3, 4}) {
    JobResult job =
        run_job(np, worker_on_two_hosts("mixed"), {.timeout = std::chrono::seconds(90)});
    ASSERT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
    std::printf("np %d on two hosts: %s\n", np, fast_counts(job).c_str());
    EXPECT_GT(job.fast_path_collectives[0], 0u) << fast_counts(job);
  }
}

TEST(FastPath, AcrossHostsALateRankMakesTheOthersFallBackAtTheirDeadline) {
  // Rank 1 speaks for the second host (4 ranks) or is it (2 ranks); the arbiter fails the
  // rounds it is late for a 2 ms wait after the first host's report.
  for (int np : {2, 4}) {
    JobResult job = run_job(np, worker_on_two_hosts("skew"), {.timeout = std::chrono::seconds(60)});
    ASSERT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
    for (int r = 0; r < 2; ++r)
      EXPECT_LE(job.fast_path_collectives[static_cast<size_t>(r)], 30u)
          << "np " << np << "; " << fast_counts(job);
  }
}

TEST(FastPath, AcrossHostsJoinedRanksContributeNeutralDataThroughTheCoordinator) {
  for (int np : {2, 4}) {
    JobResult job = run_job(np, worker_on_two_hosts("join"), {.timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
  }
}

TEST(FastPath, AcrossHostsAPeerThatShutDownIsNotWaitedFor) {
  for (int np : {2, 4}) {
    JobResult job =
        run_job(np, worker_on_two_hosts("peer-leaves"), {.timeout = std::chrono::seconds(60)});
    EXPECT_TRUE(job.all_succeeded()) << "np " << np << "\n" << job.describe();
  }
}

TEST(FastPath, AcrossHostsARankDyingMidRunFailsThePeersNextCallPromptly) {
  expect_dying_rank_fails_the_peer(worker_on_two_hosts("abort"));
}

}  // namespace
}  // namespace hvrun::test
