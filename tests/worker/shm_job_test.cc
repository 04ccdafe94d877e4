// The shared-memory data plane in real jobs: through hvrun (no segment left in /dev/shm after a
// normal end, a rank failing during set-up, or SIGKILL of hvrun), and hierarchical multi-host
// jobs simulated on this machine by giving ranks different HVRUN_HOST values.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/process/shm_cleanup.h"
#include "tests/support/child_process.h"
#include "tests/support/shm_files.h"
#include "tests/support/worker_job.h"
#include "worker_lib/backends/shm/shm_segment.h"

namespace hvrun::test {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> segments_of(const std::string& job_id) {
  return shm_files_named(detail::shm::segment_prefix(job_id));
}

// Polls (bounded) until the job's segments exist (want = true) or are gone (want = false).
bool wait_for_segments(const std::string& job_id, bool want, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (segments_of(job_id).empty() != want) return true;
    std::this_thread::sleep_for(20ms);  // polling a file system condition, not synchronising
  }
  return segments_of(job_id).empty() != want;
}

std::string job_id_in(const std::string& out) {
  std::smatch m;
  static const std::regex re("job=([A-Za-z0-9_.-]+)");
  return std::regex_search(out, m, re) ? m[1].str() : "";
}

std::vector<std::string> hvrun_args(int np, const std::string& mode) {
  return {"-np",
          std::to_string(np),
          "-H",
          "localhost:" + std::to_string(np),
          "--grace-period",
          "1",
          bin_path("hvrun_shm_test_worker"),
          mode};
}

TEST(ShmJob, LauncherAndWorkerLibraryAgreeOnSegmentNames) {
  for (const std::string job : {"hvrun-0a1b2c3d", "0123456789abcdef", "odd/job id"})
    EXPECT_EQ(launcher::shm_segment_prefix(job), detail::shm::segment_prefix(job));
}

TEST(ShmJob, NormalEndLeavesNoSegmentAndUsesSharedMemory) {
  HvrunProcess hvrun(hvrun_args(3, "normal"), {{"HVRUN_LOG_LEVEL", "debug"}});
  auto code = hvrun.wait_exit(60s);
  ASSERT_TRUE(code.has_value()) << hvrun.err();
  EXPECT_EQ(*code, 0) << hvrun.out() << hvrun.err();
  const std::string job = job_id_in(hvrun.out());
  ASSERT_FALSE(job.empty()) << hvrun.out();
  EXPECT_NE(hvrun.err().find("CPU data plane: shm"), std::string::npos) << hvrun.err();
  EXPECT_TRUE(segments_of(job).empty());
}

TEST(ShmJob, RankFailingDuringSetupLeavesNoSegment) {
  HvrunProcess hvrun(hvrun_args(2, "rank1-fails"), {});
  auto code = hvrun.wait_exit(60s);
  ASSERT_TRUE(code.has_value()) << hvrun.err();
  EXPECT_NE(*code, 0) << hvrun.out() << hvrun.err();
  // Rank 0 may be stopped before it prints the job id: hvrun's own log line names it too.
  std::smatch logged;
  std::string job = job_id_in(hvrun.out());
  if (job.empty() && std::regex_search(hvrun.err(), logged, std::regex("coordinator for job (\\S+) ")))
    job = logged[1].str();
  ASSERT_FALSE(job.empty()) << hvrun.out() << hvrun.err();
  EXPECT_TRUE(segments_of(job).empty());
}

TEST(ShmJob, SigkillOfHvrunLeavesNoSegment) {
  // Rank 1 registers, then blocks in shm_open (preloaded stub) until the orphan guard kills it.
  const std::string script = "if [ \"$HVRUN_RANK\" = 1 ]; then export LD_PRELOAD=" +
                             bin_path("libhvrun_test_stall_shm_open.so") + "; fi; exec " +
                             bin_path("hvrun_shm_test_worker") + " normal";
  HvrunProcess hvrun({"-np", "2", "-H", "localhost:2", "--grace-period", "1", "sh", "-c", script},
                     {});
  ASSERT_TRUE(hvrun.read_until([](const std::string& out) { return !job_id_in(out).empty(); }, 30s))
      << hvrun.out() << hvrun.err();
  const std::string job = job_id_in(hvrun.out());
  // Rank 0 created the segment and waits for rank 1 to map it: the window a crash can leak.
  ASSERT_TRUE(wait_for_segments(job, true, 30s)) << hvrun.err();
  ASSERT_EQ(::kill(hvrun.pid(), SIGKILL), 0);
  auto code = hvrun.wait_exit(20s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGKILL);
  EXPECT_TRUE(wait_for_segments(job, false, 10s)) << "left behind: " << segments_of(job).at(0);
}

// Ranks alternate between two simulated hosts; the coordinator assigns local ranks.
std::vector<std::string> on_two_hosts(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {bin_path("hvrun_test_worker")};
  argv.insert(argv.end(), args.begin(), args.end());
  return on_two_simulated_hosts(argv);
}

class HierarchicalJobTest : public ::testing::TestWithParam<int> {};

TEST_P(HierarchicalJobTest, EveryCollectiveMatchesReferenceAcrossTwoSimulatedHosts) {
  JobOptions options;
  options.extra_env = {{"HVRUN_LOG_LEVEL", "debug"}};
  JobResult job = run_job(GetParam(), on_two_hosts({"collectives", "--large"}), options);
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_NE(job.ranks[0].err.find("CPU data plane: hierarchical"), std::string::npos)
      << job.ranks[0].err.substr(0, 4000);
  // allgather and alltoall need the mesh of every rank: connected at their first call.
  for (const auto& rank : job.ranks)
    EXPECT_NE(rank.err.find("connecting the Gloo mesh of every rank"), std::string::npos)
        << rank.err.substr(0, 4000);
}

INSTANTIATE_TEST_SUITE_P(Ranks, HierarchicalJobTest, ::testing::Values(3, 4));

// `np` ranks of the test worker's collectives over six simulated hosts (debug log): every rank
// succeeded, and rank 0's log has each of `lines`.
void collectives_on_six_hosts(int np, const std::vector<std::string>& lines) {
  JobOptions options;
  options.timeout = std::chrono::seconds(120);
  options.extra_env = {{"HVRUN_LOG_LEVEL", "debug"}};
  JobResult job = run_job(np, on_simulated_hosts(6, {bin_path("hvrun_test_worker"), "collectives"}),
                          options);
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  const std::string& err = job.ranks[0].err;
  for (const std::string& line : lines)
    EXPECT_NE(err.find(line), std::string::npos) << line << "\n" << err.substr(0, 4000);
}

TEST(HierarchicalJob, SixHostsLeadersOnASparseMeshRunEveryCollective) {
  // 7 ranks on 6 simulated hosts (the first has two): the 6 leaders pair only with leaders 1, 2
  // and 4 apart (not 3: gloo/mesh_bootstrap.h), which allreduce, broadcast from every root and
  // barrier use; allgather and alltoall take the mesh of every rank.
  collectives_on_six_hosts(
      7, {"CPU data plane: hierarchical",
          "Gloo mesh gloo-leaders: rank 0 of 6 connected with 4 peers (sparse)"});
}

TEST(HierarchicalJob, GlooAloneOverSixHostsStartsSparseAndConnectsEveryPairForAllgather) {
  // One rank per host: Gloo alone. Its allreduce, broadcast and barrier run on the sparse mesh
  // (4 peers of 5 at 6 ranks); the first allgather connects the mesh of every rank.
  collectives_on_six_hosts(
      6, {"CPU data plane: gloo",
          "Gloo mesh gloo-sparse: rank 0 of 6 connected with 4 peers (sparse)",
          "gloo data plane: connecting the Gloo mesh of every rank (6 ranks)"});
}

TEST(HierarchicalJob, OffMeansGlooForEveryRank) {
  JobOptions options;
  options.extra_env = {{"HVRUN_LOG_LEVEL", "debug"}, {"HVRUN_HIERARCHICAL_ALLREDUCE", "off"}};
  JobResult job = run_job(4, on_two_hosts({"collectives"}), options);
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_NE(job.ranks[0].err.find("CPU data plane: gloo"), std::string::npos)
      << job.ranks[0].err.substr(0, 4000);
}

TEST(ShmJob, GlooStillSelectableOnOneHost) {
  JobOptions options;
  options.extra_env = {{"HVRUN_LOG_LEVEL", "debug"}, {"HVRUN_CPU_BACKEND", "gloo"}};
  JobResult job = run_job(2, {bin_path("hvrun_test_worker"), "collectives"}, options);
  ASSERT_TRUE(job.all_succeeded()) << job.describe();
  EXPECT_NE(job.ranks[0].err.find("CPU data plane: gloo"), std::string::npos);
}

}  // namespace
}  // namespace hvrun::test
