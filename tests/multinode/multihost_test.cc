// hvrun across two hosts made of network namespaces (scripts/netns-cluster): hostA and hostB
// joined by a veth pair (eth1 on hostA, ens5 on hostB), each with a decoy interface (eth0) the
// other cannot reach, and a real sshd each. hvrun runs inside hostA's namespace and starts
// agents on both over ssh.
//
// Every wait is bounded; every process is found and killed by pid; the namespaces (and whatever
// still runs in them) are removed at the end, also on failure.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/host_processes.h"
#include "tests/support/namespace_hosts.h"
#include "tests/support/subprocess.h"
#include "tests/worker/train_output.h"

namespace hvrun::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const char* const kRsh = kNamespaceRsh;

class MultiHostTest : public NamespaceHostsTest<MultiHostTest> {
 public:
  static constexpr const char* kScript = "netns-cluster";
  static constexpr const char* kWhat = "multi-host harness";

 protected:
  void TearDown() override {
    // Nothing of this test may survive it, in any namespace.
    for (pid_t pid : our_trainers()) ::kill(pid, SIGKILL);
  }

  // The trainers this test's hosts run: `train` and `hvrun_autopsy_worker` processes in hostA's
  // or hostB's namespace (other tests on this machine run them too, in the machine's own).
  static std::vector<pid_t> our_trainers() {
    const std::string a = netns_of_name(env_["NS_A"]), b = netns_of_name(env_["NS_B"]);
    std::vector<pid_t> out;
    for (const char* name : {"train", "hvrun_autopsy_worker"}) {
      for (pid_t pid : processes_running(exe(name))) {
        const std::string ns = netns_of_pid(pid);
        if (ns == a || ns == b) out.push_back(pid);
      }
    }
    return out;
  }

  static std::string exe(const char* name) {
    std::error_code ec;
    auto p = std::filesystem::canonical(bin_path(name), ec);
    return ec ? bin_path(name) : p.string();
  }

  // An autopsy of a job whose rank 1 is on hostB (tests/autopsy/autopsy_worker.cc gets it stuck
  // before its step 3 in `mode`): hvrun's stderr once the report line came (or 60 s passed),
  // the verdict, and the JSON report. hvrun is then stopped with SIGTERM.
  struct RemoteAutopsy {
    std::string err, verdict, json;
  };
  static RemoteAutopsy remote_autopsy(const std::string& mode);

  // hvrun inside hostA's namespace, over both hosts.
  static std::vector<std::string> hvrun_argv(const std::vector<std::string>& trainer_args,
                                             const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {ip_command(),
                                     "netns",
                                     "exec",
                                     env_["NS_A"],
                                     bin_path("hvrun"),
                                     "-np",
                                     "4",
                                     "-H",
                                     "hostA:2,hostB:2",
                                     "-p",
                                     env_["SSH_PORT"],
                                     "-i",
                                     env_["KEY"],
                                     "--rsh",
                                     kRsh,
                                     "--start-timeout",
                                     "60"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(bin_path("train"));
    argv.insert(argv.end(), trainer_args.begin(), trainer_args.end());
    return argv;
  }

  // hvrun in the background, once rank 0 printed its first epoch.
  std::unique_ptr<LoggedProcess> start_training(const char* name);
  // Kills `victim` (a pid in hostB's namespace) once training is under way; the job must end
  // within 15 s naming hostB, and no worker may survive anywhere.
  void kill_mid_run_and_check(const std::function<pid_t(pid_t agent)>& victim_of, const char* what);
  // Within 5 s: no worker and no agent left in any namespace.
  void expect_nothing_left(const std::string& context);
};

TEST_F(MultiHostTest, TrainingAcrossTwoHostsConvergesOverTheVethNotTheDecoy) {
  RunOptions opts;
  opts.timeout = seconds(90);
  auto t0 = Clock::now();
  RunResult r = run_process(hvrun_argv({"--epochs", "3"}, {"--verbose"}), opts);
  auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
  std::cerr << "[multinode] 4 ranks on hostA:2,hostB:2, 3 epochs: " << took.count() << " ms\n";
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

  expect_trained_alike(r.out, 4, 3);

  // The veth (eth1) carries the job on both hosts and the coordinator; the decoy (eth0) that the
  // other host cannot reach was probed and refused; loopback never considered.
  EXPECT_NE(r.err.find("coordinator " + env_["ADDR_A"] + ":"), std::string::npos) << r.err;
  // Interface names differ between the hosts (eth1 on hostA, ens5 on hostB).
  EXPECT_NE(r.err.find("hostA uses " + env_["IFACE_A"] + " " + env_["ADDR_A"]), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hostB uses " + env_["IFACE_B"] + " " + env_["ADDR_B"]), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hostB: eth0 (" + env_["DECOY_B"] + "): not reached from hostA"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hostA: eth0 (" + env_["DECOY_A"] + "): not reached from hostB"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hostB: lo (127.0.0.1): loopback, never used"), std::string::npos);
  // Each rank's environment names its own host's address and interface, the secret hidden.
  EXPECT_NE(r.err.find("NCCL_SOCKET_IFNAME==" + env_["IFACE_A"]), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("NCCL_SOCKET_IFNAME==" + env_["IFACE_B"]), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GLOO_SOCKET_IFNAME=" + env_["IFACE_B"]), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("HVRUN_DATA_ADDR=" + env_["ADDR_B"]), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("HVRUN_SECRET=<hidden>"), std::string::npos);
  // The gradients' async allreduces agreed across the hosts without the coordinator after the
  // first step (the cached rounds' arbiter on rank 0, over the veth).
  const auto fast = r.err.find("hvrun: fast path (no coordinator): rank 0 ");
  EXPECT_NE(fast, std::string::npos) << r.err;
  if (fast != std::string::npos)
    std::cerr << "[multinode] " << r.err.substr(fast, r.err.find('\n', fast) - fast) << "\n";
  EXPECT_TRUE(our_trainers().empty());
}

TEST_F(MultiHostTest, NamedInterfacesEnvironmentAndMinusXReachRemoteRanks) {
  // --network-interface takes the first listed name each host has (no probe); the launch
  // host's environment is forwarded (NCCL_DEBUG; the user's NCCL_* win over hvrun's choice),
  // HOSTNAME is not, -x adds a variable; remote ranks start in hvrun's directory.
  std::vector<std::string> argv = {ip_command(),
                                   "netns",
                                   "exec",
                                   env_["NS_A"],
                                   bin_path("hvrun"),
                                   "-H",
                                   "hostA:1,hostB:1",
                                   "-p",
                                   env_["SSH_PORT"],
                                   "-i",
                                   env_["KEY"],
                                   "--rsh",
                                   kRsh,
                                   "--verbose",
                                   "--network",
                                   "ethernet",
                                   "--network-interface",
                                   "ens5,eth1",
                                   "-x",
                                   "HVRUN_TEST_MARK=x y",
                                   "/bin/sh",
                                   "-c",
                                   "echo env $HVRUN_HOST $HVRUN_DATA_ADDR $NCCL_SOCKET_IFNAME "
                                   "$GLOO_SOCKET_IFNAME $NCCL_IB_DISABLE $NCCL_DEBUG "
                                   "${HOSTNAME:-none} $HVRUN_TEST_MARK $(pwd)"};
  RunOptions opts;
  opts.timeout = seconds(60);
  opts.env["NCCL_DEBUG"] = "INFO";
  opts.env["HOSTNAME"] = "launch-host-name";
  RunResult r = run_process(argv, opts);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_NE(r.out.find("[0]<stdout>:env hostA " + env_["ADDR_A"] + " =eth1 eth1 1 INFO"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>:env hostB " + env_["ADDR_B"] + " =ens5 ens5 1 INFO"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" x y " + cwd + "\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("launch-host-name"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("hostB: ens5 (" + env_["ADDR_B"] + "): chosen by --network-interface"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("NCCL_DEBUG=INFO (set by you, passed on unchanged)"), std::string::npos)
      << r.err;
}

std::unique_ptr<LoggedProcess> MultiHostTest::start_training(const char* name) {
  auto job = start_logged(hvrun_argv({"--epochs", "100000"}), dir_, name);
  // Training is under way once rank 0 printed an epoch.
  auto deadline = Clock::now() + seconds(60);
  while (Clock::now() < deadline && epoch_losses(read_file(job->out_path)).empty()) ::usleep(50000);
  EXPECT_FALSE(epoch_losses(read_file(job->out_path)).empty())
      << "no epoch within 60 s\n"
      << read_file(job->out_path) << read_file(job->err_path);
  EXPECT_EQ(our_trainers().size(), 4u);
  return job;
}

void MultiHostTest::expect_nothing_left(const std::string& context) {
  // No worker survives, in either namespace (agents kill theirs; a lost host's die with it).
  auto gone_by = Clock::now() + seconds(5);
  while (Clock::now() < gone_by &&
         (!our_trainers().empty() || hvrun_agent_in(env_["NS_A"]) > 0 ||
          hvrun_agent_in(env_["NS_B"]) > 0))
    ::usleep(50000);
  EXPECT_TRUE(our_trainers().empty()) << context;
  EXPECT_EQ(hvrun_agent_in(env_["NS_A"]), -1) << context;
  EXPECT_EQ(hvrun_agent_in(env_["NS_B"]), -1) << context;
}

void MultiHostTest::kill_mid_run_and_check(const std::function<pid_t(pid_t)>& victim_of,
                                           const char* what) {
  auto job = start_training(what);
  ASSERT_FALSE(HasFailure());
  pid_t agent = hvrun_agent_in(env_["NS_B"]);
  ASSERT_GT(agent, 0) << "no hvrun agent found in hostB's namespace";
  pid_t victim = victim_of(agent);
  ASSERT_GT(victim, 1);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  auto killed_at = Clock::now();
  std::optional<int> code = job->wait(seconds(15));
  auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at);
  std::string err = read_file(job->err_path);
  std::cerr << "[multinode] " << what << " killed: hvrun exited " << (code ? *code : -1)
            << " after " << took.count() << " ms\n";
  ASSERT_TRUE(code.has_value()) << "hvrun still running 15 s after the kill\n" << err;
  EXPECT_EQ(*code, 1) << err;
  // Either hvrun saw the remote shell end first ("lost the agent on host hostB") or the
  // coordinator saw hostB's workers' streams drop ("rank 2 on host hostB ... disconnected").
  size_t failed = err.find("hvrun: job failed: ");
  ASSERT_NE(failed, std::string::npos) << err;
  std::string verdict = err.substr(failed, err.find('\n', failed) - failed);
  EXPECT_NE(verdict.find("host hostB"), std::string::npos) << err;
  expect_nothing_left(err);
}

TEST_F(MultiHostTest, KillingAHostsAgentEndsTheJobNamingTheHost) {
  kill_mid_run_and_check([](pid_t agent) { return agent; }, "agent");
}

TEST_F(MultiHostTest, KillingAHostsSshSessionEndsTheJobNamingTheHost) {
  // The agent's parent is sshd's per-connection process ("sshd: root@notty").
  kill_mid_run_and_check(
      [](pid_t agent) {
        const pid_t parent = parent_of(agent);
        auto words = cmdline_of(parent);
        EXPECT_FALSE(words.empty() || words[0].find("sshd") == std::string::npos)
            << "the agent's parent is not sshd";
        return parent;
      },
      "sshd-session");
}

// Elastic: hostB's agent is killed mid-run (its workers die with it). The job goes on with
// hostA's two ranks, blacklists hostB, finishes, and its weights equal the replay of the steps it
// logged (tests/python/elastic_check.py: same samples, in the same order, each epoch complete).
TEST_F(MultiHostTest, ElasticJobGoesOnWithoutALostHost) {
  const std::string python = HVRUN_TEST_PYTHON;
  RunOptions probe;
  probe.timeout = seconds(60);
  if (run_process({python, "-c", "import torch, pytest"}, probe).exit_code != 0)
    GTEST_SKIP() << python << " lacks torch or pytest (scripts/install-deps)";
  const std::string here = source_dir() + "/tests/python";
  std::vector<std::string> argv = {ip_command(), "netns", "exec", env_["NS_A"], bin_path("hvrun"),
                                   "-np", "4", "-H", "hostA:2,hostB:2", "-p", env_["SSH_PORT"],
                                   "-i", env_["KEY"], "--rsh", kRsh, "--start-timeout", "60",
                                   "--min-np", "2", "--elastic-timeout", "60",
                                   "-x", std::string("PYTHONPATH=") + HVRUN_TEST_PYTHONPATH,
                                   "-x", "OMP_NUM_THREADS=1", "-x", "ELASTIC_EPOCHS=3",
                                   "-x", "ELASTIC_STEP_SLEEP=0.3", "-x", "ELASTIC_PRINT_STEPS=1",
                                   python, here + "/elastic_train.py"};
  auto job = start_logged(argv, dir_, "elastic");
  auto deadline = Clock::now() + seconds(90);
  while (Clock::now() < deadline &&
         read_file(job->out_path).find("STEP 3 SIZE 4") == std::string::npos)
    ::usleep(50000);
  ASSERT_NE(read_file(job->out_path).find("STEP 3 SIZE 4"), std::string::npos)
      << "no third step within 90 s\n" << read_file(job->out_path) << read_file(job->err_path);
  const pid_t agent = hvrun_agent_in(env_["NS_B"]);
  ASSERT_GT(agent, 0) << "no hvrun agent found in hostB's namespace";
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  const auto killed_at = Clock::now();
  std::optional<int> code = job->wait(seconds(120));
  const std::string out = read_file(job->out_path), err = read_file(job->err_path);
  std::cerr << "[multinode] elastic, hostB's agent killed: hvrun exited " << (code ? *code : -1)
            << " after " << std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at).count()
            << " ms\n";
  ASSERT_TRUE(code.has_value()) << "hvrun still running 120 s after the kill\n" << out << err;
  EXPECT_EQ(*code, 0) << out << err;
  EXPECT_NE(err.find("was lost with the agent on hostB"), std::string::npos) << err;
  EXPECT_NE(err.find("blacklisted: hostB (1 failure, blacklisted for the rest of the job); 2 ranks "
                     "left"),
            std::string::npos)
      << err;
  EXPECT_NE(out.find("SIZE 2"), std::string::npos) << out;
  RunOptions check;
  check.timeout = seconds(60);
  check.env["PYTHONPATH"] = HVRUN_TEST_PYTHONPATH;
  RunResult checked = run_process({python, here + "/elastic_check.py", job->out_path, "2", "4,2"},
                                  check);
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  expect_nothing_left(err);
}

MultiHostTest::RemoteAutopsy MultiHostTest::remote_autopsy(const std::string& mode) {
  const std::string autopsies = dir_ + "/autopsy-" + mode;
  std::filesystem::create_directories(autopsies);
  const std::vector<std::string> argv = {
      ip_command(), "netns", "exec", env_["NS_A"], bin_path("hvrun"), "-np", "2", "-H",
      "hostA:1,hostB:1", "-p", env_["SSH_PORT"], "-i", env_["KEY"], "--rsh", kRsh,
      "--start-timeout", "60",
      "--stall-check-warning-time-seconds", "2", "--autopsy-deadline-seconds", "2",
      "--autopsy-dir", autopsies, "--heartbeat-timeout", "120", "--grace-period", "1",
      bin_path("hvrun_autopsy_worker"), mode};
  auto job = start_logged(argv, dir_, "autopsy-" + mode);
  const auto limit = Clock::now() + seconds(60);
  RemoteAutopsy a;
  while (Clock::now() < limit) {
    a.err = read_file(job->err_path);
    const size_t at = a.err.find("full report in ");
    if (at != std::string::npos && a.err.find('\n', at) != std::string::npos) break;
    ::usleep(50000);
  }
  ::kill(job->pid, SIGTERM);
  job->wait(seconds(15));
  a.err = read_file(job->err_path);
  const std::string head = "hvrun: autopsy: ";
  if (const size_t at = a.err.find(head); at != std::string::npos)
    a.verdict = a.err.substr(at + head.size(), a.err.find('\n', at) - at - head.size());
  std::cerr << "[multinode] autopsy (" << mode << "): " << a.verdict << "\n";
  if (const size_t at = a.err.find(" and ", a.err.find("full report in ")); at != std::string::npos)
    a.json = read_file(a.err.substr(at + 5, a.err.find('\n', at) - at - 5));
  return a;
}

// A stopped rank cannot answer: hostB's agent reads its state, and the verdict says "stopped".
TEST_F(MultiHostTest, AutopsyReadsAStoppedRemoteRanksStateThroughItsAgent) {
  const RemoteAutopsy a = remote_autopsy("stop");
  EXPECT_EQ(a.verdict.rfind("rank 1 on hostB has not submitted '", 0), 0u) << a.err;
  EXPECT_NE(a.verdict.find("did not answer within 2.0 s"), std::string::npos) << a.verdict;
  EXPECT_NE(a.verdict.find("is stopped"), std::string::npos) << a.verdict;
  EXPECT_NE(a.json.find("read by the agent on host hostB"), std::string::npos) << a.json;
  expect_nothing_left(a.err);
}

// A rank blocked in read() answers for itself across hosts: the verdict names its function and
// line, and the system call its agent-side state shows.
TEST_F(MultiHostTest, AutopsyNamesTheFunctionAndLineOfARemoteRankBlockedInRead) {
  const RemoteAutopsy a = remote_autopsy("pipe");
  EXPECT_EQ(a.verdict.rfind("rank 1 on hostB has not submitted '", 0), 0u) << a.err;
  EXPECT_NE(a.verdict.find(" block_in_read"), std::string::npos) << a.verdict;
  EXPECT_NE(a.verdict.find("(sleeping in read)"), std::string::npos) << a.verdict;
  EXPECT_FALSE(a.json.empty()) << a.err;
  expect_nothing_left(a.err);
}

TEST_F(MultiHostTest, SigintToHvrunStopsEveryHostsWorkers) {
  auto job = start_training("sigint");
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(::kill(job->pid, SIGINT), 0);
  std::optional<int> code = job->wait(seconds(15));
  std::string err = read_file(job->err_path);
  ASSERT_TRUE(code.has_value()) << err;
  EXPECT_EQ(*code, 130) << err;
  EXPECT_NE(err.find("hvrun received SIGINT"), std::string::npos) << err;
  expect_nothing_left(err);
}

TEST_F(MultiHostTest, SigkillToHvrunLeavesNoWorkerOnAnyHost) {
  // hvrun's remote shells die with it (PR_SET_PDEATHSIG and its guard); each agent then sees its
  // stdin close and kills its workers.
  auto job = start_training("sigkill");
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(::kill(job->pid, SIGKILL), 0);
  ASSERT_TRUE(job->wait(seconds(5)).has_value());
  expect_nothing_left(read_file(job->err_path));
}

}  // namespace
}  // namespace hvrun::test
