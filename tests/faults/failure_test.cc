// Stuck and dead ranks become prompt, named errors (labels worker, faults):
//  - the stall warning (2 s) names the missing rank and tensor, once, within 3 s (and the
//    process set, for a stall on one; and in a steady state agreed without the coordinator
//    across two simulated hosts);
//  - SIGKILL of one rank in the middle of a 64 MiB allreduce fails every other rank's handle and
//    ends hvrun non-zero within 10 s, naming that rank (through the real bin/hvrun);
//  - a stopped rank (no heartbeat) aborts the job naming it and its host;
//  - killing the coordinator (the standalone bin/hvrun-coordinator) fails every worker within
//    10 s, naming the coordinator's address;
//  - a worker of another job (HVRUN_JOB_ID) is refused by the standalone coordinator, both job
//    ids named; a worker without the secret is told it is missing, not wrong.
// Every process has a hard deadline and is killed by pid / process group.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <thread>

#include "tests/support/child_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/worker_job.h"

namespace hvrun::test {
namespace {

using Clock = std::chrono::steady_clock;

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A stall job through the real hvrun (warning after 2 s): its stderr, and the warning line
// about `late_rank` (empty when there is none).
struct StallRun {
  RunResult result;
  size_t warning = std::string::npos;
  std::string line;
};

StallRun run_stall_job(int np, const std::string& mode, int late_rank,
                       const std::vector<std::string>& trainer_prefix = {}) {
  RunOptions run;
  run.timeout = std::chrono::seconds(60);
  StallRun s;
  std::vector<std::string> argv = {bin_path("hvrun"), "-np", std::to_string(np), "-H",
                                   "localhost:" + std::to_string(np),
                                   "--stall-check-warning-time-seconds", "2"};
  argv.insert(argv.end(), trainer_prefix.begin(), trainer_prefix.end());
  argv.push_back(bin_path("hvrun_faults_worker"));
  std::stringstream words(mode);
  for (std::string word; words >> word;) argv.push_back(word);
  s.result = run_process(argv, run);
  const std::string& err = s.result.err;
  s.warning = err.find("stall: rank " + std::to_string(late_rank) + " ");
  if (s.warning != std::string::npos)
    s.line = err.substr(s.warning, err.find('\n', s.warning) - s.warning);
  return s;
}

TEST(Faults, StallWarningNamesTheMissingRankWithinThreeSeconds) {
  StallRun s = run_stall_job(2, "stall", 1);
  const RunResult& r = s.result;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_NE(s.warning, std::string::npos) << r.err;
  EXPECT_NE(s.line.find("has not submitted allreduce 'stalled.tensor'"), std::string::npos) << s.line;
  EXPECT_NE(s.line.find("submitted by rank 0"), std::string::npos) << s.line;
  EXPECT_NE(s.line.find("last completed operation: barrier"), std::string::npos) << s.line;
  EXPECT_EQ(count_of(r.err, "stall: "), 1u) << "one warning per stall\n" << r.err;
  // Rank 1 submits 3 s after rank 0: the warning (after 2 s) must come before that.
  const size_t late = r.err.find("rank 1: submitting stalled.tensor now");
  ASSERT_NE(late, std::string::npos) << r.err;
  EXPECT_LT(s.warning, late) << "the warning came later than 3 s\n" << r.err;
}

TEST(Faults, StallOnAProcessSetNamesTheSetAndTheJobsRank) {
  StallRun s = run_stall_job(3, "stall-on-set", 2);
  const RunResult& r = s.result;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_NE(s.warning, std::string::npos) << r.err;
  EXPECT_NE(s.line.find("has not submitted allreduce 'set.tensor' on process set 1"),
            std::string::npos) << s.line;
  EXPECT_NE(s.line.find("submitted by rank 1"), std::string::npos) << s.line;
  const size_t late = r.err.find("rank 2: submitting set.tensor now");
  ASSERT_NE(late, std::string::npos) << r.err;
  EXPECT_LT(s.warning, late) << "the warning came later than 3 s\n" << r.err;
}

// The steady state runs without the coordinator, across hosts too (the cached rounds and their
// arbiter): a rank that stops submitting makes the others' rounds fail, their ops reach the
// coordinator, and its stall warning names the late rank. Ranks alternate between two simulated
// hosts; rank 3 is not its host's speaker.
TEST(Faults, AStallInTheSteadyStateAcrossHostsIsNamedByTheCoordinator) {
  StallRun s = run_stall_job(
      4, "stall-steady 3", 3,
      on_two_simulated_hosts());
  const RunResult& r = s.result;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ASSERT_NE(s.warning, std::string::npos) << r.err;
  EXPECT_NE(s.line.find("has not submitted allreduce 'steady."), std::string::npos) << s.line;
  EXPECT_EQ(count_of(r.err, "stall: "), 1u) << "one warning per stall\n" << r.err;
  const size_t late = r.err.find("rank 3: submitting step 10 now");
  ASSERT_NE(late, std::string::npos) << r.err;
  EXPECT_LT(s.warning, late) << "the warning came later than 3 s\n" << r.err;
  // The steps before ran without the coordinator, across the hosts.
  EXPECT_NE(r.err.find("hvrun: fast path (no coordinator): rank 0 "), std::string::npos) << r.err;
}

TEST(Faults, RankKilledMidAllreduceFailsEveryOtherRankAndHvrunNamesIt) {
  RunOptions run;
  run.timeout = std::chrono::seconds(60);
  run.env["HVRUN_OP_TIMEOUT"] = "60";  // so only the teardown can explain a prompt failure
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "-H", "localhost:3", "--grace-period",
                             "8", bin_path("hvrun_faults_worker"), "kill-in-allreduce"},
                            run);
  EXPECT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_LT(r.elapsed, std::chrono::seconds(15)) << "start-up plus at most 10 s\n" << r.out << r.err;
  for (int survivor : {0, 2}) {
    const std::string tag = "[" + std::to_string(survivor) + "]<stdout>:rank " + std::to_string(survivor) +
                            ": handle failed after ";
    EXPECT_NE(r.out.find(tag), std::string::npos) << r.out << r.err;
  }
  EXPECT_EQ(r.err.find("FAIL:"), std::string::npos) << r.err;
  // It died inside the collective (its first elements reduced, its last not yet).
  EXPECT_NE(r.err.find("rank 1: SIGKILL now, inside the allreduce"), std::string::npos) << r.err;
  // hvrun's summary names the dead rank (from its exit status or from the lost stream).
  const size_t summary = r.err.find("hvrun: job failed: ");
  ASSERT_NE(summary, std::string::npos) << r.err;
  EXPECT_NE(r.err.substr(summary, r.err.find('\n', summary) - summary).find("rank 1 on"), std::string::npos)
      << r.err;
  // Every other rank's handle names it too (the coordinator's abort reason).
  for (int survivor : {0, 2}) {
    const size_t line = r.out.find("[" + std::to_string(survivor) + "]<stdout>:");
    ASSERT_NE(line, std::string::npos) << r.out;
    EXPECT_NE(r.out.substr(line, r.out.find('\n', line) - line).find("ABORTED: job aborted: rank 1 on"),
              std::string::npos)
        << r.out;
  }
}

TEST(Faults, ARequestTheCoordinatorCannotParseFailsTheJobNamingTheRank) {
  RunOptions run;
  run.timeout = std::chrono::seconds(60);
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "2", "-H", "localhost:2", bin_path("hvrun_garbage_rank")}, run);
  EXPECT_FALSE(r.timed_out) << r.out << r.err;
  // Every rank exited 0: only the coordinator's abort can (and must) fail the job.
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  const std::string cause = "rank 1 on host localhost (pid ";
  const std::string what = "sent a negotiation message the coordinator cannot parse";
  // Every rank, the sender too, hears the abort naming rank 1 on its stream.
  for (int rank : {0, 1}) {
    const std::string tag = "[" + std::to_string(rank) + "]<stdout>:rank " + std::to_string(rank) +
                            ": heard JobAbort: " + cause;
    const size_t line = r.out.find(tag);
    ASSERT_NE(line, std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.substr(line, r.out.find('\n', line) - line).find(what), std::string::npos)
        << r.out;
  }
  // The coordinator logged it, and hvrun's summary carries it.
  EXPECT_NE(r.err.find("job aborted: " + cause), std::string::npos) << r.err;
  const size_t summary = r.err.find("hvrun: job failed: ");
  ASSERT_NE(summary, std::string::npos) << r.err;
  EXPECT_NE(r.err.substr(summary, r.err.find('\n', summary) - summary).find(what), std::string::npos)
      << r.err;
}

TEST(Faults, StoppedRankAbortsTheJobOnItsHeartbeatTimeout) {
  const TempDir failed_dir("faults-stopped");  // where the others say they saw the abort
  JobOptions options;
  options.timeout = std::chrono::seconds(30);
  options.heartbeat_timeout = std::chrono::seconds(1);
  options.extra_env["HVRUN_OP_TIMEOUT"] = "60";
  options.extra_env["FAULTS_READY_DIR"] = failed_dir.path();
  JobResult job = run_job(3, {bin_path("hvrun_faults_worker"), "stopped"}, options);
  ASSERT_EQ(job.ranks.size(), 3u);
  EXPECT_EQ(job.ranks[1].exit_code, 128 + 9) << job.describe();
  for (int r : {0, 2}) {
    EXPECT_EQ(job.ranks[r].exit_code, 0) << job.describe();
    EXPECT_LT(job.ranks[r].elapsed, std::chrono::seconds(10)) << job.describe();
    EXPECT_NE(job.ranks[r].out.find("on host localhost"), std::string::npos) << job.describe();
  }
}

// Two workers negotiate with a standalone hvrun-coordinator; once both wait on a collective,
// `stop` kills or stops the coordinator: both must fail within 10 s, naming its address.
void expect_workers_fail_when_coordinator(const std::function<void(ChildProcess&)>& stop) {
  const std::string secret = "faults-test-secret";
  ChildProcess daemon({bin_path("hvrun-coordinator"), "--world-size", "2"},
                      {.env = {{"HVRUN_SECRET", secret}}, .stdin_text = ""});
  ASSERT_TRUE(daemon.started());
  auto address = daemon.read_line(std::chrono::seconds(20));
  ASSERT_TRUE(address.has_value()) << daemon.err();

  const TempDir ready_files("faults-ready");
  const std::string& ready_dir = ready_files.path();

  std::vector<RunResult> results(2);
  std::vector<Clock::time_point> ended(2);
  std::vector<std::thread> workers;
  for (int r = 0; r < 2; ++r) {
    RunOptions run;
    run.timeout = std::chrono::seconds(45);
    const std::string rank = std::to_string(r);
    run.env = {{"HVRUN_RANK", rank}, {"HVRUN_SIZE", "2"}, {"HVRUN_LOCAL_RANK", rank},
               {"HVRUN_LOCAL_SIZE", "2"}, {"HVRUN_HOST", "localhost"},
               {"HVRUN_COORDINATOR_ADDR", *address}, {"HVRUN_SECRET", secret},
               {"HVRUN_DATA_ADDR", "127.0.0.1"}, {"HVRUN_OP_TIMEOUT", "60"},
               {"FAULTS_READY_DIR", ready_dir}};
    workers.emplace_back([&, r, run] {
      results[r] = run_process({bin_path("hvrun_faults_worker"), "coordinator-lost"}, run);
      ended[r] = Clock::now();
    });
  }
  // Wait (bounded) until both workers are negotiating, then kill the coordinator.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  auto ready = [&] {
    return std::filesystem::exists(ready_dir + "/ready.0") && std::filesystem::exists(ready_dir + "/ready.1");
  };
  while (!ready() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool both_ready = ready();
  const auto killed_at = Clock::now();
  stop(daemon);
  for (auto& t : workers) t.join();
  ASSERT_TRUE(both_ready) << results[0].err << results[1].err;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].out << results[r].err;
    EXPECT_LT(ended[r] - killed_at, std::chrono::seconds(10)) << results[r].out << results[r].err;
    EXPECT_NE(results[r].out.find("failed as expected"), std::string::npos) << results[r].out << results[r].err;
  }
  daemon.kill_now();
}

TEST(Faults, KilledCoordinatorFailsEveryWorkerWithinTenSeconds) {
  expect_workers_fail_when_coordinator([](ChildProcess& daemon) { daemon.kill_now(); });
}

// A hung coordinator keeps its connections open: the workers' keepalive pings go unanswered.
TEST(Faults, StoppedCoordinatorFailsEveryWorkerWithinTenSeconds) {
  expect_workers_fail_when_coordinator([](ChildProcess& daemon) { kill(daemon.pid(), SIGSTOP); });
}

// One worker against `hvrun-coordinator --world-size 1 --job-id adv-job-B` (secret
// "identity-secret"), with `env` over the identity a launcher would give it; its result.
RunResult run_worker_against_job_b(const std::map<std::string, std::optional<std::string>>& env) {
  ChildProcess daemon({bin_path("hvrun-coordinator"), "--world-size", "1", "--job-id", "adv-job-B",
                       "--start-timeout", "5"},
                      {.env = {{"HVRUN_SECRET", "identity-secret"}}, .stdin_text = ""});
  EXPECT_TRUE(daemon.started());
  const auto address = daemon.read_line(std::chrono::seconds(20));
  EXPECT_TRUE(address.has_value()) << daemon.err();
  if (!address) return {};
  RunOptions run;
  run.timeout = std::chrono::seconds(30);
  run.env = {{"HVRUN_RANK", "0"}, {"HVRUN_LOCAL_RANK", "0"}, {"HVRUN_HOST", "localhost"},
             {"HVRUN_COORDINATOR_ADDR", *address}, {"HVRUN_SECRET", "identity-secret"},
             {"HVRUN_JOB_ID", "adv-job-B"}, {"HVRUN_DATA_ADDR", "127.0.0.1"},
             {"HVRUN_START_TIMEOUT", "5"}};
  for (const auto& [k, v] : env) run.env[k] = v;
  RunResult result = run_process({bin_path("hvrun_faults_worker"), "coordinator-lost"}, run);
  daemon.kill_now();
  return result;
}

TEST(Faults, WorkerOfAnotherJobIsRefusedNamingBothJobs) {
  const RunResult r = run_worker_against_job_b({{"HVRUN_JOB_ID", "other-job"}});
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("FAILED_PRECONDITION"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("belongs to job 'other-job'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runs job 'adv-job-B'"), std::string::npos) << r.err;
}

TEST(Faults, MissingSecretIsCalledMissingNotWrong) {
  const RunResult r = run_worker_against_job_b({{"HVRUN_SECRET", std::nullopt}});
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("UNAUTHENTICATED"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no job secret"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("wrong"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hvrun::test
