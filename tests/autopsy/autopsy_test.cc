// Hang autopsies through the real hvrun (label autopsy). Two ranks run steps of three
// allreduces; before step 3 rank 1 gets stuck: (a) a Python rank sleeps in its data loader,
// (b) a C++ rank blocks in read() on a pipe, (c) a rank is stopped (SIGSTOP), (d) a rank
// deadlocks on a mutex held by another of its threads. With the stall warning at 2 s, hvrun's
// autopsy verdict must name rank 1, its host and where it is (the function and line, or
// "stopped") within 5 s of the warning, and the JSON report must parse. And autopsies asked of
// a job that is not stuck (on Gloo and on shared memory) leave it running with right results.
// Each job is bounded (60 s) and killed with its process group; the stuck rank bounds itself.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include "hvrun.pb.h"
#include "tests/support/child_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kJobLimit = std::chrono::seconds(60);

struct Autopsy {
  std::string err;              // hvrun's stderr up to the report line
  std::string verdict;          // the line after "hvrun: autopsy: "
  std::chrono::milliseconds after_warning{-1};  // verdict seen - stall warning seen
  std::string json_path;
  std::string text_path;
};

std::string line_at(const std::string& text, size_t at) {
  return text.substr(at, text.find('\n', at) - at);
}

// The line number of the first line of `file` that contains `what` (0 when none).
int line_of(const std::string& file, const std::string& what) {
  std::ifstream in(file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(what) != std::string::npos) return n;
  return 0;
}

// Runs `command` as a 2-rank hvrun job until its autopsy's report line (or the limit), then
// ends it.
// `poke`, when given, is called as output arrives (it may signal hvrun); the verdict's delay is
// then counted from its first call that returned true instead of from the stall warning.
Autopsy run_until_autopsy(const std::vector<std::string>& command, const TempDir& dir,
                          const EnvChanges& env = {},
                          const std::function<bool(ChildProcess&)>& poke = nullptr,
                          const std::string& warning_seconds = "2") {
  std::vector<std::string> argv = {bin_path("hvrun"), "-np", "2", "-H", "localhost:2",
                                   "--stall-check-warning-time-seconds", warning_seconds,
                                   "--autopsy-deadline-seconds", "2", "--autopsy-dir", dir.path(),
                                   "--heartbeat-timeout", "120", "--grace-period", "1"};
  argv.insert(argv.end(), command.begin(), command.end());
  ChildOptions options;
  options.env = env;
  ChildProcess job(argv, options);
  Autopsy a;
  if (!job.started()) return a;
  const auto limit = Clock::now() + kJobLimit;
  std::optional<Clock::time_point> warned, judged;
  while (Clock::now() < limit && job.pump(std::chrono::milliseconds(20))) {
    const std::string& err = job.err();
    if (!warned && (poke ? poke(job) : err.find("stall: rank") != std::string::npos))
      warned = Clock::now();
    if (!judged && err.find("hvrun: autopsy: ") != std::string::npos) judged = Clock::now();
    if (err.find("full report in ") != std::string::npos &&
        err.find('\n', err.find("full report in ")) != std::string::npos)
      break;
  }
  job.stop(std::chrono::seconds(5));
  a.err = job.err();
  if (warned && judged)
    a.after_warning = std::chrono::duration_cast<std::chrono::milliseconds>(*judged - *warned);
  if (const size_t at = a.err.find("hvrun: autopsy: "); at != std::string::npos)
    a.verdict = line_at(a.err, at + std::string("hvrun: autopsy: ").size());
  std::smatch files;
  const std::string err = a.err;
  if (std::regex_search(err, files, std::regex("full report in (\\S+\\.txt) and (\\S+\\.json)"))) {
    a.text_path = files[1];
    a.json_path = files[2];
  }
  return a;
}

// The JSON report parses as an AutopsyJobReport of both ranks with the printed verdict.
v1::AutopsyJobReport parsed_report(const Autopsy& a) {
  v1::AutopsyJobReport report;
  const std::string json = read_file(a.json_path);
  EXPECT_FALSE(json.empty()) << a.json_path << "\n" << a.err;
  auto status = google::protobuf::util::JsonStringToMessage(json, &report);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json.substr(0, 2000);
  EXPECT_EQ(report.ranks_size(), 2) << json.substr(0, 2000);
  EXPECT_EQ(report.verdict(), a.verdict);
  EXPECT_FALSE(read_file(a.text_path).empty()) << a.text_path;
  return report;
}

void expect_prompt_verdict_on_rank_1(const Autopsy& a) {
  ASSERT_FALSE(a.verdict.empty()) << a.err;
  // (hvrun's Python API names tensors "allreduce.<name>", as Horovod does.)
  EXPECT_EQ(a.verdict.rfind("rank 1 on localhost has not submitted '", 0), 0u) << a.verdict;
  EXPECT_NE(a.verdict.find("grad.fc1.3' (3 tensors behind)"), std::string::npos) << a.verdict;
  EXPECT_GE(a.after_warning.count(), 0) << a.err;
  EXPECT_LE(a.after_warning.count(), 5000) << a.err;
}

std::string worker_source() { return source_dir() + "/tests/autopsy/autopsy_worker.cc"; }

TEST(Autopsy, CppRankBlockedInReadIsNamedWithItsFunctionAndLine) {
  const TempDir dir("autopsy-pipe");
  const Autopsy a = run_until_autopsy({bin_path("hvrun_autopsy_worker"), "pipe"}, dir);
  expect_prompt_verdict_on_rank_1(a);
  const int line = line_of(worker_source(), "::read(fds[0]");
  ASSERT_GT(line, 0);
  EXPECT_NE(a.verdict.find("autopsy_worker.cc:" + std::to_string(line) + " block_in_read"),
            std::string::npos)
      << a.verdict;
  EXPECT_NE(a.verdict.find("(sleeping in read)"), std::string::npos) << a.verdict;
  const v1::AutopsyJobReport report = parsed_report(a);
  ASSERT_EQ(report.ranks_size(), 2);
  EXPECT_TRUE(report.ranks(0).answered());
  EXPECT_TRUE(report.ranks(1).answered());
  // Rank 0 waits in step 3's three allreduces; its ring holds steps 0-2 done.
  EXPECT_EQ(report.ranks(0).report().waiting_size(), 3) << report.ranks(0).report().DebugString();
  EXPECT_GE(report.ranks(0).report().ring_size(), 12);
}

TEST(Autopsy, RankDeadlockedOnAMutexIsNamedWithTheLockItWaitsFor) {
  const TempDir dir("autopsy-mutex");
  const Autopsy a = run_until_autopsy({bin_path("hvrun_autopsy_worker"), "mutex"}, dir);
  expect_prompt_verdict_on_rank_1(a);
  const int line = line_of(worker_source(), "second(second_lock);  // the helper holds it");
  ASSERT_GT(line, 0);
  EXPECT_NE(a.verdict.find("autopsy_worker.cc:" + std::to_string(line) + " take_second_lock"),
            std::string::npos)
      << a.verdict;
  EXPECT_NE(a.verdict.find("(sleeping in futex)"), std::string::npos) << a.verdict;
  (void)parsed_report(a);
}

TEST(Autopsy, StoppedRankIsNamedUnresponsiveAndStopped) {
  const TempDir dir("autopsy-stop");
  const Autopsy a = run_until_autopsy({bin_path("hvrun_autopsy_worker"), "stop"}, dir);
  expect_prompt_verdict_on_rank_1(a);
  EXPECT_NE(a.verdict.find("did not answer within 2.0 s"), std::string::npos) << a.verdict;
  EXPECT_NE(a.verdict.find("is stopped"), std::string::npos) << a.verdict;
  const v1::AutopsyJobReport report = parsed_report(a);
  ASSERT_EQ(report.ranks_size(), 2);
  EXPECT_TRUE(report.ranks(0).answered());
  EXPECT_FALSE(report.ranks(1).answered());
  EXPECT_EQ(report.ranks(1).process().state(), "stopped");
}

TEST(Autopsy, Sigusr1ToHvrunAsksForOneWithoutAStallWarning) {
  const TempDir dir("autopsy-sigusr1");
  const Autopsy a = run_until_autopsy(
      {bin_path("hvrun_autopsy_worker"), "pipe"}, dir, {},
      [](ChildProcess& job) {
        if (job.err().find("rank 1: blocking in read()") == std::string::npos ||
            job.err().find("rank 0: waiting in step 3") == std::string::npos)
          return false;
        return ::kill(job.pid(), SIGUSR1) == 0;
      },
      "0");  // no stall warning: only the signal asks
  expect_prompt_verdict_on_rank_1(a);
  EXPECT_EQ(a.err.find("stall: rank"), std::string::npos) << a.err;
  EXPECT_NE(a.verdict.find("block_in_read"), std::string::npos) << a.verdict;
  EXPECT_NE(a.err.find("autopsy (SIGUSR1 to hvrun)"), std::string::npos) << a.err;
  EXPECT_EQ(parsed_report(a).trigger(), "SIGUSR1 to hvrun");
}

// An autopsy signals every thread of every rank to read its stack, the data plane's too: a job
// asked for several while it runs must go on and finish with every result right, on Gloo (TCP:
// its threads sit in epoll_wait, recv and send) and on shared memory (futex waits).
void expect_autopsies_leave_a_running_job_right(const std::string& backend) {
  const TempDir dir("autopsy-busy-" + backend);
  ChildProcess job({bin_path("hvrun"), "-np", "2", "-H", "localhost:2", "--cpu-backend", backend,
                    "--autopsy-deadline-seconds", "2", "--autopsy-dir", dir.path(),
                    "--stall-check-warning-time-seconds", "0", "--heartbeat-timeout", "120",
                    bin_path("hvrun_autopsy_worker"), "busy"});
  ASSERT_TRUE(job.started());
  const auto limit = Clock::now() + kJobLimit;
  auto busy = [&] {
    return job.err().find("rank 0: busy") != std::string::npos &&
           job.err().find("rank 1: busy") != std::string::npos;
  };
  while (Clock::now() < limit && !busy() && job.pump(std::chrono::milliseconds(20))) {
  }
  ASSERT_TRUE(busy()) << job.err();
  int asked = 0;
  for (; asked < 3 && job.running(); ++asked) {
    ASSERT_EQ(::kill(job.pid(), SIGUSR1), 0);
    const auto next = Clock::now() + std::chrono::milliseconds(300);
    while (Clock::now() < next && job.pump(std::chrono::milliseconds(20))) {
    }
  }
  const std::optional<int> code = job.wait_exit(std::chrono::seconds(50));
  if (!code) job.kill_now();
  ASSERT_TRUE(code) << job.err();
  EXPECT_EQ(*code, 0) << job.err();
  EXPECT_GE(asked, 2) << "the job ended before the autopsies: make it longer\n" << job.err();
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(job.err().find("rank " + std::to_string(r) + ": 1500 busy steps right"),
              std::string::npos) << job.err();
  EXPECT_NE(job.err().find("autopsy (SIGUSR1 to hvrun)"), std::string::npos) << job.err();
}

TEST(Autopsy, AutopsiesOfARunningGlooJobLeaveItsCollectivesRight) {
  expect_autopsies_leave_a_running_job_right("gloo");
}

TEST(Autopsy, AutopsiesOfARunningShmJobLeaveItsCollectivesRight) {
  expect_autopsies_leave_a_running_job_right("shm");
}

// Runs the pipe job until rank 1 blocks in read() and rank 0 waits in step 3, then starts
// `hvrun dump <the job's pid>` with `dump_args` in `dump`; returns the job's autopsy once the
// dump finished with exit 0.
Autopsy dump_a_stuck_job(const TempDir& dir, std::vector<std::string> dump_args,
                         const ChildOptions& dump_options, std::optional<ChildProcess>& dump) {
  const Autopsy a = run_until_autopsy(
      {bin_path("hvrun_autopsy_worker"), "pipe"}, dir, {},
      [&](ChildProcess& job) {
        if (job.err().find("rank 1: blocking in read()") == std::string::npos ||
            job.err().find("rank 0: waiting in step 3") == std::string::npos)
          return false;
        std::vector<std::string> argv{bin_path("hvrun"), "dump", std::to_string(job.pid())};
        argv.insert(argv.end(), dump_args.begin(), dump_args.end());
        dump.emplace(argv, dump_options);
        return true;
      },
      "0");
  expect_prompt_verdict_on_rank_1(a);
  EXPECT_TRUE(dump && dump->started());
  if (!dump || !dump->started()) return a;
  const std::optional<int> code = dump->wait_exit(std::chrono::seconds(30));
  EXPECT_TRUE(code) << dump->err();
  if (code) {
    EXPECT_EQ(*code, 0) << dump->err();
  }
  return a;
}

TEST(Autopsy, HvrunDumpAsksARunningJobAndPrintsItsReport) {
  const TempDir dir("autopsy-dump");
  std::optional<ChildProcess> dump;
  const Autopsy a = dump_a_stuck_job(dir, {"--autopsy-dir", dir.path()}, {}, dump);
  ASSERT_TRUE(dump);
  EXPECT_NE(dump->out().find("verdict: " + a.verdict), std::string::npos) << dump->out();
}

// `hvrun dump PID` alone (another shell: another TMPDIR, no flags) waits where the job writes.
TEST(Autopsy, HvrunDumpFindsTheReportInTheJobsAutopsyDir) {
  const TempDir dir("autopsy-dump-dir");
  const TempDir elsewhere("autopsy-dump-tmp");  // the dumping shell's TMPDIR: stays empty
  ChildOptions options;
  options.env = {{"TMPDIR", elsewhere.path()}};
  std::optional<ChildProcess> dump;
  const Autopsy a = dump_a_stuck_job(dir, {"--wait-seconds", "20"}, options, dump);
  ASSERT_TRUE(dump);
  EXPECT_NE(dump->err().find("waiting for its report in " + dir.path()), std::string::npos)
      << dump->err();
  EXPECT_NE(dump->out().find("verdict: " + a.verdict), std::string::npos) << dump->out();
}

TEST(Autopsy, AHeartbeatAbortWaitsForItsAutopsy) {
  const TempDir dir("autopsy-heartbeat");
  ChildProcess job({bin_path("hvrun"), "-np", "2", "-H", "localhost:2",
                    "--stall-check-warning-time-seconds", "0", "--heartbeat-timeout", "2",
                    "--autopsy-deadline-seconds", "2", "--autopsy-dir", dir.path(),
                    "--grace-period", "1", bin_path("hvrun_autopsy_worker"), "stop"});
  ASSERT_TRUE(job.started());
  const std::optional<int> code = job.wait_exit(kJobLimit);
  ASSERT_TRUE(code) << job.err();
  EXPECT_NE(*code, 0);
  const std::string& err = job.err();
  // The coordinator aborts once the autopsy is complete, and hvrun prints the verdict before
  // it tears the job down.
  const size_t collected = err.find("of 2 ranks answered");
  const size_t aborted = err.find("sent no heartbeat");
  const size_t verdict = err.find("hvrun: autopsy: rank 1 on localhost");
  const size_t teardown = err.find("stopping the job");
  ASSERT_NE(collected, std::string::npos) << err;
  ASSERT_NE(aborted, std::string::npos) << err;
  ASSERT_NE(verdict, std::string::npos) << err;
  ASSERT_NE(teardown, std::string::npos) << err;
  EXPECT_LT(collected, aborted) << err;
  EXPECT_LT(verdict, teardown) << err;
  EXPECT_NE(line_at(err, verdict).find("is stopped"), std::string::npos) << line_at(err, verdict);
  EXPECT_NE(err.find("autopsy (heartbeat timeout (--heartbeat-timeout 2.0))"), std::string::npos)
      << err;
}

#ifdef HVRUN_TEST_PYTHON
TEST(Autopsy, PythonRankSleepingInItsDataLoaderIsNamedWithItsPythonLines) {
  const TempDir dir("autopsy-python");
  const std::string script = source_dir() + "/tests/autopsy/autopsy_train.py";
  const Autopsy a = run_until_autopsy({HVRUN_TEST_PYTHON, script}, dir,
                                      {{"PYTHONPATH", HVRUN_TEST_PYTHONPATH},
                                       {"PYTHONDONTWRITEBYTECODE", "1"},
                                       {"OMP_NUM_THREADS", "1"}});
  expect_prompt_verdict_on_rank_1(a);
  const int sleep_line = line_of(script, "time.sleep(STUCK_SECONDS)");
  const int load_line = line_of(script, "return read_samples(step)");
  ASSERT_GT(sleep_line, 0);
  EXPECT_NE(a.verdict.find("autopsy_train.py:" + std::to_string(load_line) + " load_batch -> " +
                           "autopsy_train.py:" + std::to_string(sleep_line) + " read_samples"),
            std::string::npos)
      << a.verdict;
  EXPECT_NE(a.verdict.find("(sleeping in "), std::string::npos) << a.verdict;
  (void)parsed_report(a);
}
#endif

}  // namespace
}  // namespace hvrun::test
