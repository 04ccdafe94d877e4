// The GPU executor's multi-rank logic on CPUs: real `hvrun -np N --device-plane host` jobs whose
// CUDA tensors are host memory, so the GPU executor (backends/nccl/gpu_executor.cc) runs with
// the host plane (backends/nccl/host_plane/) where CUDA and NCCL would be. The rank program is
// host_plane_worker.cc. Every job is bounded by run_process's timeout, which kills its process
// group. These tests need no GPU and never skip.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun::test {
namespace {

RunResult host_plane_job(int np, std::vector<std::string> flags, const std::string& mode,
                         std::chrono::seconds timeout, std::map<std::string, std::optional<std::string>> env = {}) {
  std::vector<std::string> argv{bin_path("hvrun"), "-np", std::to_string(np), "--device", "cpu",
                                "--device-plane", "host"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(bin_path("hvrun_host_plane_worker"));
  argv.push_back(mode);
  RunOptions run;
  run.timeout = timeout;
  run.env = std::move(env);
  return run_process(argv, run);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class HostPlaneCollectives : public ::testing::TestWithParam<int> {};

TEST_P(HostPlaneCollectives, EveryCollectiveAndDtypeMatchesTheCpuPath) {
  const int np = GetParam();
  RunResult r = host_plane_job(np, {}, "collectives", std::chrono::seconds(240));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "host plane collectives: OK"), np) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  // The GPU executor set up its communicator through the host plane, once per rank.
  EXPECT_EQ(count(r.err, "communicator ready on host plane device"), np) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostPlaneCollectives, ::testing::Values(2, 3, 4));

// Per rank, the collectives hvrun's telemetry summary says ran without the coordinator ("hvrun:
// fast path (no coordinator): rank 0 N of M collectives, rank 1 ..."); -1 for a rank it omits.
std::vector<long> run_without_coordinator(const std::string& err, int np) {
  std::vector<long> n(static_cast<size_t>(np), -1);
  const size_t at = err.find("hvrun: fast path (no coordinator): ");
  if (at == std::string::npos) return n;
  const std::string line = err.substr(at, err.find('\n', at) - at);
  const std::regex one("rank (\\d+) (\\d+) of (\\d+)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), one); it != std::sregex_iterator(); ++it) {
    const int rank = std::stoi((*it)[1].str());
    if (rank >= 0 && rank < np) n[static_cast<size_t>(rank)] = std::stol((*it)[2].str());
  }
  return n;
}

class HostPlaneSteadyState : public ::testing::TestWithParam<int> {};

// A training step on CUDA tensors that are all cached agrees through the round agreement and
// runs the GPU executor without the coordinator: 20 steps of six tensors (two fused responses a
// step), then 20 of a changed set (a new shape, a new name) whose first step goes through the
// coordinator. Every step's results equal the CPU path's (the worker checks them). A round
// waits up to 2 s here, so ranks descheduled on this loaded 2-core machine still meet: the
// point is that the steady state skips the coordinator, not how often a late rank misses it.
TEST_P(HostPlaneSteadyState, CachedCudaAllreducesSkipTheCoordinator) {
  const int np = GetParam();
  RunResult r = host_plane_job(np, {}, "steady", std::chrono::seconds(240),
                               {{"HVRUN_FAST_PATH_WAIT_MS", "2000"}});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "host plane steady: OK"), np) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  // 38 steps may run by agreement (each set's first step must be negotiated: a round would run
  // the cached shape), two fused responses each: 76 when every one did. Through the coordinator
  // there is no such line at all; at most a quarter of them may miss their round here.
  const std::vector<long> skipped = run_without_coordinator(r.err, np);
  for (int rank = 0; rank < np; ++rank) {
    EXPECT_GE(skipped[static_cast<size_t>(rank)], 57) << "rank " << rank << "\n" << r.err;
    EXPECT_LE(skipped[static_cast<size_t>(rank)], 76) << "rank " << rank << "\n" << r.err;
  }
  const size_t line = r.err.find("hvrun: fast path (no coordinator): ");
  if (line != std::string::npos)
    std::printf("np %d: %s\n", np, r.err.substr(line, r.err.find('\n', line) - line).c_str());
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostPlaneSteadyState, ::testing::Values(2, 3, 4));

TEST(HostPlaneJobs, AJoinedRankContributesNeutralValues) {
  RunResult r = host_plane_job(3, {}, "join", std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "host plane join: OK"), 3) << r.out << r.err;
}

TEST(HostPlaneJobs, AbortFailsAHeldCollectiveOnEveryRankPromptly) {
  RunResult r = host_plane_job(2, {}, "abort", std::chrono::seconds(90));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(count(r.out, "abort path: OK"), 2) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(HostPlaneJobs, OpTimeoutFailsAHeldCollectiveOnEveryRank) {
  RunResult r = host_plane_job(2, {"--op-timeout", "3"}, "timeout", std::chrono::seconds(90));
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "timeout path: OK"), 2) << r.out << r.err;
  EXPECT_GE(count(r.out, "op timeout named"), 1) << r.out << r.err;
}

// Ranks only leave: the survivors keep their communicator and shrink it, with no new unique id.
TEST(HostPlaneJobs, AnElasticResetShrinksTheSurvivorsCommunicator) {
  RunResult r = host_plane_job(3, {"--min-np", "2"}, "elastic", std::chrono::seconds(120),
                               {{"ELASTIC_KILL_RANK", "2"}, {"ELASTIC_KILL_AT", "5"}});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Steps 1-4 on 3 ranks (committed at step 4), then 5-10 on 2: 3 * 4 + 2 * 6.
  EXPECT_NE(r.out.find("TOTAL 24 EXPECTED 24 SIZE 2 RESETS 1"), std::string::npos) << r.out << r.err;
  // A communicator of 3 ranks made by init, then the 2 survivors' shrunk from it.
  EXPECT_EQ(count(r.err, "communicator ready on host plane device"), 3 + 2) << r.err;
  EXPECT_EQ(count(r.err, "(3 ranks), made by init (a new unique id): no rank holds a communicator"), 3) << r.err;
  EXPECT_EQ(count(r.err, "(2 ranks), made by shrink of the last membership's 3-rank communicator "
                         "without rank(s) 2;"), 2) << r.err;
}

// A middle rank leaves: the survivors above it move down one rank, as ncclCommShrink orders them.
TEST(HostPlaneJobs, LosingAMiddleRankShrinksTheCommunicatorInTheOldOrder) {
  RunResult r = host_plane_job(4, {"--min-np", "2"}, "elastic", std::chrono::seconds(120),
                               {{"ELASTIC_KILL_RANK", "1"}, {"ELASTIC_KILL_AT", "5"}});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Steps 1-4 on 4 ranks, then 5-10 on 3: 4 * 4 + 3 * 6.
  EXPECT_NE(r.out.find("TOTAL 34 EXPECTED 34 SIZE 3 RESETS 1"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(count(r.err, "(3 ranks), made by shrink of the last membership's 4-rank communicator "
                         "without rank(s) 1;"), 3) << r.err;
}

// A rank joins: a shrink cannot add it, so every rank makes a new communicator (init).
TEST(HostPlaneJobs, ARankJoiningRebuildsTheCommunicatorByInit) {
  TempDir dir("host-plane-grow");
  const std::string hosts = dir.file("hosts");
  {
    std::ofstream out(hosts);
    out << "localhost:2\n";
  }
  RunResult r = host_plane_job(2, {"--max-np", "3", "--elastic-timeout", "60", "--host-discovery-script", "cat " + hosts},
                               "elastic", std::chrono::seconds(150), {{"ELASTIC_GROW", hosts + ":3:localhost:3"}});
  ASSERT_FALSE(r.timed_out) << r.out << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(TOTAL (\d+) EXPECTED (\d+) SIZE 3 RESETS 1)"))) << r.out << r.err;
  EXPECT_EQ(m[1], m[2]) << r.out;
  EXPECT_EQ(count(r.err, "(2 ranks), made by init (a new unique id): no rank holds a communicator"), 2) << r.err;
  EXPECT_EQ(count(r.err, "(3 ranks), made by init (a new unique id) after an elastic reset: rank 2 joined"), 3)
      << r.err;
}

}  // namespace
}  // namespace hvrun::test
