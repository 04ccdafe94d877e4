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

}  // namespace
}  // namespace hvrun::test
