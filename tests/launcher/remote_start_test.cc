// The pre-flight check of a multi-host job through the real hvrun, with stand-in remote shells
// (--rsh) that fail the ways real ones do: hvrun missing on the host, another hvrun version, no
// answer. Each failure names the host, carries the remote shell's words, exits 1 and leaves
// nothing running; a signal to hvrun during the check ends it at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/child_process.h"
#include "tests/support/poll_until.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace hvrun::test {
namespace {

class RemoteStartTest : public ::testing::Test {
 protected:
  // A stand-in remote shell: gets "[options] HOST COMMAND" like ssh, runs `body`.
  std::string rsh(const std::string& name, const std::string& body) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  RunResult hvrun(const std::string& rsh_path, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {bin_path("hvrun"), "-H", "nodeA.test:1,nodeB.test:1", "--rsh",
                                     rsh_path};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("true");
    RunOptions opts;
    opts.timeout = std::chrono::seconds(20);
    return run_process(argv, opts);
  }
  const TempDir temp_{"rsh"};
  const std::string dir_ = temp_.path();
};

TEST_F(RemoteStartTest, HvrunMissingOnAHostIsNamedWithTheShellsMessage) {
  RunResult r = hvrun(rsh("missing", "echo \"sh: 1: /opt/hvrun: not found\" >&2; exit 127"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("pre-flight check of the hosts failed"), std::string::npos) << r.err;
  for (const char* host : {"nodeA.test", "nodeB.test"})
    EXPECT_NE(r.err.find(std::string("host ") + host + ": hvrun is not installed at"),
              std::string::npos)
        << r.err;
  EXPECT_NE(r.err.find("/opt/hvrun: not found"), std::string::npos) << r.err;
}

TEST_F(RemoteStartTest, AnotherHvrunVersionIsRefused) {
  RunResult r = hvrun(rsh("old", "printf 'HELLO 5\\n0.0.0IFACES_DONE 0\\n'; exec sleep 30"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("host nodeA.test runs hvrun 0.0.0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("install the same version on every host"), std::string::npos) << r.err;
  EXPECT_LT(r.elapsed.count(), 10000);
}

TEST_F(RemoteStartTest, AHostThatNeverAnswersFailsWithinTheStartTimeout) {
  RunResult r = hvrun(rsh("silent", "echo 'connecting slowly...' >&2; exec sleep 60"),
                      {"--start-timeout", "1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("host nodeB.test: hvrun agent did not answer within --start-timeout (1 s)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("connecting slowly..."), std::string::npos) << r.err;
  EXPECT_LT(r.elapsed.count(), 8000);
}

TEST_F(RemoteStartTest, SigintDuringThePreFlightEndsItAtOnceAndLeavesNoShell) {
  // Shells that hang (a host that accepts the connection and never starts the agent), each
  // leaving its pid behind.
  const std::string shell =
      rsh("hanging", "echo $$ > " + dir_ + "/shell-$$.pid; exec sleep 60");
  ChildProcess hvrun_process({bin_path("hvrun"), "-H", "nodeA.test:1,nodeB.test:1", "--rsh", shell,
                              "--start-timeout", "60", "true"});
  ASSERT_TRUE(hvrun_process.started());
  std::vector<pid_t> shells;
  ASSERT_TRUE(poll_until([&] {
    shells.clear();
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      if (entry.path().extension() != ".pid") continue;
      pid_t pid = 0;
      std::ifstream(entry.path()) >> pid;
      if (pid > 0) shells.push_back(pid);
    }
    return shells.size() == 2;
  }, std::chrono::seconds(10), std::chrono::milliseconds(20)));
  for (pid_t pid : shells) hvrun_process.also_kill_on_exit(pid);

  const auto signalled = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(hvrun_process.pid(), SIGINT), 0);
  std::optional<int> code = hvrun_process.wait_exit(std::chrono::seconds(10));
  const auto took = std::chrono::steady_clock::now() - signalled;
  ASSERT_TRUE(code.has_value()) << hvrun_process.err();
  EXPECT_EQ(*code, 130) << hvrun_process.err();
  EXPECT_LT(took, std::chrono::seconds(3)) << hvrun_process.err();
  EXPECT_NE(hvrun_process.err().find("hvrun received SIGINT"), std::string::npos)
      << hvrun_process.err();
  for (pid_t pid : shells)
    EXPECT_TRUE(poll_until([pid] { return ::kill(pid, 0) != 0; }, std::chrono::seconds(2),
                           std::chrono::milliseconds(20)))
        << "remote shell " << pid << " outlived hvrun";
}

TEST_F(RemoteStartTest, SshsOwnMessageIsShown) {
  // Real ssh, a name that cannot resolve: no network is needed for this failure.
  RunResult r = hvrun("ssh");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("host nodeA.test: ssh failed: ssh: Could not resolve hostname nodea.test"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hvrun::test
