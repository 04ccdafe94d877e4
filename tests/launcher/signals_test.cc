// Signals and teardown through the real hvrun: SIGINT is forwarded and bounded by the grace
// period; SIGKILL of hvrun leaves no worker or worker child behind.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <regex>
#include <thread>

#include "tests/support/child_process.h"

namespace hvrun::test {
namespace {

using std::chrono::milliseconds;

// Each worker prints "ready <rank> <its pid> <its child's pid>" once it and its child run.
const char* kWorkerWithChild =
    "sleep 60 & echo \"ready $HVRUN_RANK $$ $!\"; wait";

std::vector<pid_t> ready_pids(const std::string& out, int ranks) {
  std::vector<pid_t> pids;
  std::regex ready(R"(\]<stdout>:ready (\d+) (\d+) (\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), ready); it != std::sregex_iterator();
       ++it) {
    pids.push_back(std::stoi((*it)[2]));
    pids.push_back(std::stoi((*it)[3]));
  }
  return static_cast<int>(pids.size()) == 2 * ranks ? pids : std::vector<pid_t>{};
}

bool all_ready(const std::string& out, int ranks) { return !ready_pids(out, ranks).empty(); }

TEST(HvrunSignalsTest, SigintEndsEveryChildWithinTheGracePeriod) {
  // Rank 1 ignores SIGINT and SIGTERM (and so does its child): only SIGKILL after the grace
  // period ends it.
  const std::string script =
      std::string("if [ \"$HVRUN_RANK\" = 1 ]; then trap '' INT TERM; fi; ") + kWorkerWithChild;
  HvrunProcess hvrun({"-np", "2", "--grace-period", "1", "sh", "-c", script},
                     {{"HVRUN_DEVICE", "cpu"}});
  ASSERT_TRUE(hvrun.read_until([](const std::string& o) { return all_ready(o, 2); },
                               milliseconds(10000)))
      << hvrun.out() << hvrun.err();
  std::vector<pid_t> pids = ready_pids(hvrun.out(), 2);
  for (pid_t p : pids) hvrun.also_kill_on_exit(p);

  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(hvrun.pid(), SIGINT), 0);
  std::optional<int> code = hvrun.wait_exit(milliseconds(6000));
  auto took = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  ASSERT_TRUE(code.has_value()) << "hvrun did not exit after SIGINT\n" << hvrun.err();
  EXPECT_EQ(*code, 128 + SIGINT) << hvrun.err();
  EXPECT_GE(took.count(), 900) << "rank 1 ignores SIGINT: only the SIGKILL ends it";
  EXPECT_LT(took.count(), 1000 + 1500) << hvrun.err();
  EXPECT_TRUE(wait_all_gone(pids, milliseconds(1000))) << "a worker or its child survived";
  EXPECT_NE(hvrun.err().find("SIGINT"), std::string::npos) << hvrun.err();
  EXPECT_NE(hvrun.err().find("SIGKILL"), std::string::npos) << hvrun.err();
}

TEST(HvrunSignalsTest, SigtermIsForwardedAndWorkersThatObeyEndAtOnce) {
  HvrunProcess hvrun({"-np", "2", "--grace-period", "30", "sh", "-c", kWorkerWithChild},
                     {{"HVRUN_DEVICE", "cpu"}});
  ASSERT_TRUE(hvrun.read_until([](const std::string& o) { return all_ready(o, 2); },
                               milliseconds(10000)))
      << hvrun.out() << hvrun.err();
  std::vector<pid_t> pids = ready_pids(hvrun.out(), 2);
  for (pid_t p : pids) hvrun.also_kill_on_exit(p);
  ASSERT_EQ(kill(hvrun.pid(), SIGTERM), 0);
  std::optional<int> code = hvrun.wait_exit(milliseconds(5000));  // far less than the grace
  ASSERT_TRUE(code.has_value()) << hvrun.err();
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_TRUE(wait_all_gone(pids, milliseconds(1000)));
}

TEST(HvrunSignalsTest, SigkillOfHvrunLeavesNoWorkerBehind) {
  const std::string script =
      std::string("echo \"addr $HVRUN_COORDINATOR_ADDR\"; ") + kWorkerWithChild;
  HvrunProcess hvrun({"-np", "2", "sh", "-c", script}, {{"HVRUN_DEVICE", "cpu"}});
  ASSERT_TRUE(hvrun.read_until([](const std::string& o) { return all_ready(o, 2); },
                               milliseconds(10000)))
      << hvrun.out() << hvrun.err();
  std::vector<pid_t> pids = ready_pids(hvrun.out(), 2);
  std::smatch addr;
  ASSERT_TRUE(std::regex_search(hvrun.out(), addr, std::regex(R"(addr unix:(\S+))")))
      << hvrun.out();
  const std::string socket_path = addr[1];
  // The coordinator starts while the workers start: its socket appears within moments.
  auto appear_by = std::chrono::steady_clock::now() + milliseconds(5000);
  while (!std::filesystem::exists(socket_path) && std::chrono::steady_clock::now() < appear_by)
    std::this_thread::sleep_for(milliseconds(5));
  ASSERT_TRUE(std::filesystem::exists(socket_path));
  for (pid_t p : pids) hvrun.also_kill_on_exit(p);
  // Only hvrun's own pid: its process group (with the guard) is left alone on purpose.
  ASSERT_EQ(kill(hvrun.pid(), SIGKILL), 0);
  std::optional<int> code = hvrun.wait_exit(milliseconds(5000));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGKILL);
  EXPECT_TRUE(wait_all_gone(pids, milliseconds(3000)))
      << "orphans left after SIGKILL of hvrun (workers and their children)";
  // The guard also deletes the coordinator's socket (it runs on after hvrun: poll, bounded).
  auto deadline = std::chrono::steady_clock::now() + milliseconds(3000);
  while (std::filesystem::exists(socket_path) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_FALSE(std::filesystem::exists(socket_path)) << socket_path;
}

TEST(HvrunSignalsTest, LeftoversOfASuccessfulWorkerAreNotLeftBehind) {
  // The worker exits 0 at once but leaves a child that holds its stdout open.
  HvrunProcess hvrun({"-np", "1", "sh", "-c", "sleep 60 & echo \"ready 0 $$ $!\"; exit 0"},
                     {{"HVRUN_DEVICE", "cpu"}});
  std::optional<int> code = hvrun.wait_exit(milliseconds(5000));
  ASSERT_TRUE(code.has_value()) << "hvrun waited for the worker's leftover child";
  EXPECT_EQ(*code, 0) << hvrun.err();
  std::vector<pid_t> pids = ready_pids(hvrun.out(), 1);
  ASSERT_EQ(pids.size(), 2u) << hvrun.out();
  for (pid_t p : pids) hvrun.also_kill_on_exit(p);
  EXPECT_TRUE(wait_all_gone(pids, milliseconds(1000)));
}

// Each worker starts a daemon the classic way, out of its process group: setsid() (a session and
// group of its own), then a fork whose parent exits at once (the daemon is orphaned), and
// prints "daemon <rank> <the daemon's pid>" once the daemon runs sleep (its name in
// /proc/<pid>/comm: before that it is still a copy of the shell). `daemon` is its command line.
std::string worker_with_daemon(const std::string& daemon) {
  return "d=$(setsid sh -c '" + daemon + " </dev/null >/dev/null 2>&1 & echo $!'); " +
         "c=; while [ \"$c\" != sleep ]; do read -r c < /proc/$d/comm || exit 1; done; " +
         "echo \"daemon $HVRUN_RANK $d\"";
}

std::vector<pid_t> daemon_pids(const std::string& out) {
  std::vector<pid_t> pids;
  std::regex line(R"(\]<stdout>:daemon \d+ (\d+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it)
    pids.push_back(std::stoi((*it)[1]));
  return pids;
}

TEST(HvrunSignalsTest, DaemonsTheWorkersDoubleForkedEndWithTheJobAndAreNamed) {
  HvrunProcess hvrun({"-np", "2", "sh", "-c", worker_with_daemon("sleep 600")},
                     {{"HVRUN_DEVICE", "cpu"}});
  std::optional<int> code = hvrun.wait_exit(milliseconds(10000));
  std::vector<pid_t> daemons = daemon_pids(hvrun.out());
  for (pid_t p : daemons) hvrun.also_kill_on_exit(p);
  ASSERT_TRUE(code.has_value()) << hvrun.err();
  EXPECT_EQ(*code, 0) << hvrun.err();
  ASSERT_EQ(daemons.size(), 2u) << hvrun.out();
  EXPECT_TRUE(wait_all_gone(daemons, milliseconds(1000))) << "a worker's daemon outlived the job";
  for (size_t r = 0; r < daemons.size(); ++r) {
    // The daemons start in either order: each is named with the rank whose worker started it.
    const std::string out = hvrun.out();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(out, m, std::regex("daemon " + std::to_string(r) + " (\\d+)")));
    EXPECT_NE(hvrun.err().find("pid " + m[1].str() + " (sleep 600) from rank " + std::to_string(r) +
                               ", sent SIGTERM"),
              std::string::npos)
        << hvrun.err();
  }
}

TEST(HvrunSignalsTest, ADaemonThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  HvrunProcess hvrun({"-np", "1", "--grace-period", "1", "sh", "-c",
                      worker_with_daemon("trap \"\" TERM; exec sleep 600")},
                     {{"HVRUN_DEVICE", "cpu"}});
  const auto start = std::chrono::steady_clock::now();
  std::optional<int> code = hvrun.wait_exit(milliseconds(10000));
  const auto took = std::chrono::steady_clock::now() - start;
  std::vector<pid_t> daemons = daemon_pids(hvrun.out());
  for (pid_t p : daemons) hvrun.also_kill_on_exit(p);
  ASSERT_TRUE(code.has_value()) << hvrun.err();
  EXPECT_EQ(*code, 0) << hvrun.err();
  ASSERT_EQ(daemons.size(), 1u) << hvrun.out();
  EXPECT_TRUE(wait_all_gone(daemons, milliseconds(1000))) << "the daemon outlived the job";
  EXPECT_GE(took, milliseconds(1000)) << "the daemon had the grace period after its SIGTERM";
  EXPECT_NE(hvrun.err().find("pid " + std::to_string(daemons[0]) + " (sleep 600) from rank 0, "
                             "sent SIGKILL"),
            std::string::npos)
      << hvrun.err();
}

TEST(HvrunSignalsTest, ADaemonOfAJobThatIsStoppedEndsWithIt) {
  // The worker stays; hvrun is told to stop: the daemon goes with the workers.
  HvrunProcess hvrun({"-np", "1", "--grace-period", "2", "sh", "-c",
                      worker_with_daemon("sleep 600") + "; exec sleep 600"},
                     {{"HVRUN_DEVICE", "cpu"}});
  ASSERT_TRUE(hvrun.read_until([](const std::string& o) { return daemon_pids(o).size() == 1; },
                               milliseconds(10000)))
      << hvrun.out() << hvrun.err();
  std::vector<pid_t> daemons = daemon_pids(hvrun.out());
  for (pid_t p : daemons) hvrun.also_kill_on_exit(p);
  ASSERT_EQ(kill(hvrun.pid(), SIGTERM), 0);
  std::optional<int> code = hvrun.wait_exit(milliseconds(5000));
  ASSERT_TRUE(code.has_value()) << hvrun.err();
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_TRUE(wait_all_gone(daemons, milliseconds(1000))) << "the daemon outlived the job";
  EXPECT_NE(hvrun.err().find("pid " + std::to_string(daemons[0]) + " (sleep 600) from rank 0"),
            std::string::npos)
      << hvrun.err();
}

}  // namespace
}  // namespace hvrun::test
