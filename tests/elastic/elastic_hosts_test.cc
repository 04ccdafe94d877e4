// Elastic jobs across three hosts made of network namespaces (scripts/netns-cluster up DIR 3:
// hostA, hostB and hostC on one bridge, a real sshd each). hvrun runs in hostA's namespace and
// starts agents over ssh; the trainer is tests/python/elastic_train.py (a real training loop
// whose final weights tests/python/elastic_check.py compares with a replay of the logged steps:
// same samples, same order, every epoch complete).
//
// Every wait is bounded; every process is found and killed by pid; the namespaces (and whatever
// still runs in them) are removed at the end, also on failure.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/host_processes.h"
#include "tests/support/namespace_hosts.h"
#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const char* const kRsh = kNamespaceRsh;

class ElasticHostsTest : public NamespaceHostsTest<ElasticHostsTest> {
 public:
  static constexpr const char* kScript = "netns-cluster";
  static constexpr const char* kWhat = "three-host harness";
  static constexpr const char* kArgs[] = {"3"};

 protected:
  void SetUp() override {
    NamespaceHostsTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    RunOptions probe;
    probe.timeout = seconds(60);
    if (run_process({HVRUN_TEST_PYTHON, "-c", "import torch"}, probe).exit_code != 0)
      GTEST_SKIP() << HVRUN_TEST_PYTHON << " lacks torch (scripts/install-deps)";
  }
  void TearDown() override {
    for (pid_t pid : our_trainers()) ::kill(pid, SIGKILL);
  }

  static std::vector<std::string> namespaces() {
    return {env_["NS_A"], env_["NS_B"], env_["NS_C"]};
  }

  // The trainers running in this suite's namespaces.
  static std::vector<pid_t> our_trainers() {
    std::vector<std::string> ours;
    for (const std::string& ns : namespaces()) ours.push_back(netns_of_name(ns));
    std::vector<pid_t> out;
    for (pid_t pid : all_pids()) {
      if (is_zombie(pid)) continue;
      bool trainer = false;
      for (const std::string& word : cmdline_of(pid))
        trainer |= word.find("elastic_train.py") != std::string::npos;
      if (!trainer) continue;
      const std::string ns = netns_of_pid(pid);
      for (const std::string& o : ours)
        if (ns == o) out.push_back(pid);
    }
    return out;
  }

  // hvrun in hostA's namespace with `flags`, running the elastic trainer with `trainer_env`.
  static std::vector<std::string> job(const std::vector<std::string>& flags,
                                      const std::map<std::string, std::string>& trainer_env) {
    std::vector<std::string> argv = {ip_command(), "netns", "exec", env_["NS_A"],
                                     bin_path("hvrun"), "-p", env_["SSH_PORT"], "-i", env_["KEY"],
                                     "--rsh", kRsh, "--start-timeout", "60",
                                     "--elastic-timeout", "60",
                                     "-x", std::string("PYTHONPATH=") + HVRUN_TEST_PYTHONPATH,
                                     "-x", "OMP_NUM_THREADS=1", "-x", "ELASTIC_PRINT_STEPS=1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const auto& [k, v] : trainer_env) {
      argv.push_back("-x");
      argv.push_back(k + "=" + v);
    }
    argv.push_back(HVRUN_TEST_PYTHON);
    argv.push_back(source_dir() + "/tests/python/elastic_train.py");
    return argv;
  }

  // Waits (bounded) until the job's output (the trainers' or hvrun's own) shows `text`.
  static bool wait_for_output(const LoggedProcess& p, const std::string& text, seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (read_file(p.out_path).find(text) != std::string::npos ||
          read_file(p.err_path).find(text) != std::string::npos)
        return true;
      ::usleep(50000);
    }
    return false;
  }

  // hvrun's exit within 120 s, its output checked against the replay: the membership sizes the
  // logged steps show, in order, and the final size.
  void expect_replayed(LoggedProcess& p, int final_size, const std::string& sizes) {
    std::optional<int> code = p.wait(seconds(120));
    const std::string out = read_file(p.out_path), err = read_file(p.err_path);
    ASSERT_TRUE(code.has_value()) << "hvrun still running after 120 s\n" << out << err;
    EXPECT_EQ(*code, 0) << out << err;
    // What the launcher said of the membership, for the log.
    for (const std::string& line : split_lines(err))
      if (line.find("elastic") != std::string::npos)
        std::cerr << "[elastic-hosts] " << line << "\n";
    RunOptions check;
    check.timeout = seconds(60);
    check.env["PYTHONPATH"] = HVRUN_TEST_PYTHONPATH;
    RunResult checked =
        run_process({HVRUN_TEST_PYTHON, source_dir() + "/tests/python/elastic_check.py",
                     p.out_path, std::to_string(final_size), sizes},
                    check);
    EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err << "\n" << err;
  }

  // Within 5 s: no trainer and no agent left in any of the three namespaces.
  void expect_nothing_left(const std::string& context) {
    auto any_agent = [] {
      for (const std::string& ns : namespaces())
        if (hvrun_agent_in(ns) > 0) return true;
      return false;
    };
    const auto gone_by = Clock::now() + seconds(5);
    while (Clock::now() < gone_by && (!our_trainers().empty() || any_agent())) ::usleep(50000);
    EXPECT_TRUE(our_trainers().empty()) << context;
    EXPECT_FALSE(any_agent()) << context;
  }

  // A discovery script's input file in this suite's directory.
  static std::string hosts_file(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // A slow rank across hosts: the process started as rank 2 (on hostB) sleeps 60 ms before its
  // allreduces at every step (and every rank marks its steps for the straggler attribution);
  // the discovery script's third host gives the job's one spare its place on hostC.
  // `straggler_flags`: the --replace-stragglers flags under test, if any.
  static std::vector<std::string> straggler_job(const std::vector<std::string>& straggler_flags) {
    const std::string hosts = hosts_file("straggler-hosts", "hostA:2\nhostB:2\nhostC:1\n");
    std::vector<std::string> flags = {"-np", "4", "-H", "hostA:2,hostB:2", "--spares", "1",
                                      "--host-discovery-script", "cat " + hosts};
    flags.insert(flags.end(), straggler_flags.begin(), straggler_flags.end());
    return job(flags, {{"ELASTIC_SLOW", "2:0.06"},
                       {"ELASTIC_EPOCHS", "8"},
                       {"ELASTIC_STEP_SLEEP", "0.1"}});
  }

  // straggler_job(straggler_flags) runs to its end with nobody stopped: the summary names rank
  // 2 the straggler, yet the spare on hostC stays parked, and the world size stays 4.
  void expect_straggler_kept(const std::vector<std::string>& straggler_flags) {
    auto p = start_logged(straggler_job(straggler_flags), dir_, "straggler-kept");
    expect_replayed(*p, 4, "4");
    const std::string err = read_file(p->err_path);
    EXPECT_NE(err.find("elastic: spare(s) started (hostC slot 0)"), std::string::npos) << err;
    EXPECT_NE(err.find("hvrun: straggler: rank 2 on hostB was last in"), std::string::npos) << err;
    for (const char* never : {"stopping it", "stopped as a straggler", "not replaced",
                              "spare(s) in the lost ranks' place", "blacklisted"})
      EXPECT_EQ(err.find(never), std::string::npos) << never << "\n" << err;
    expect_nothing_left(err);
  }
};

// Three hosts, two ranks each; hostC's agent is SIGKILLed mid-epoch (its workers die with it).
// The job goes on with four ranks on hostA and hostB, blacklists hostC and finishes with the
// weights of a run that followed the same membership.
TEST_F(ElasticHostsTest, LosingOneOfThreeHostsTheJobFinishesOnFourRanks) {
  auto p = start_logged(job({"-np", "6", "-H", "hostA:2,hostB:2,hostC:2", "--min-np", "2"},
                            {{"ELASTIC_EPOCHS", "3"}, {"ELASTIC_STEP_SLEEP", "0.3"}}),
                        dir_, "lose-one");
  ASSERT_TRUE(wait_for_output(*p, "STEP 3 SIZE 6", seconds(90)))
      << read_file(p->out_path) << read_file(p->err_path);
  const pid_t agent = hvrun_agent_in(env_["NS_C"]);
  ASSERT_GT(agent, 0) << "no hvrun agent in hostC's namespace";
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  expect_replayed(*p, 4, "6,4");
  const std::string err = read_file(p->err_path);
  EXPECT_NE(err.find("was lost with the agent on hostC"), std::string::npos) << err;
  EXPECT_NE(err.find("blacklisted: hostC (1 failure, blacklisted for the rest of the job); 4 "
                     "ranks left"),
            std::string::npos)
      << err;
  expect_nothing_left(err);
}

// The discovery script names hostC, and a third slot on hostB, once the job is under way: hvrun
// starts an agent on hostC over ssh, hostB's running agent starts one more rank, the three join
// at the next commit, and the job finishes on seven ranks.
TEST_F(ElasticHostsTest, ADiscoveredHostAndSlotJoinAtTheNextCommit) {
  const std::string hosts = hosts_file("grow-hosts", "hostA:2\nhostB:2\n");
  auto p = start_logged(job({"-np", "4", "-H", "hostA:2,hostB:2", "--max-np", "7",
                             "--host-discovery-script", "cat " + hosts},
                            {{"ELASTIC_EPOCHS", "3"},
                             {"ELASTIC_STEP_SLEEP", "0.2"},
                             {"ELASTIC_GROW", hosts + ":3:hostA:2,hostB:3,hostC:2"}}),
                        dir_, "grow");
  expect_replayed(*p, 7, "4,7");
  const std::string err = read_file(p->err_path);
  EXPECT_NE(err.find("elastic: 3 rank(s) added (hostB slot 2, hostC slot 0, hostC slot 1)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("elastic: hostC joined: its agent runs, its ranks use " + env_["IFACE_C"] +
                     " " + env_["ADDR_C"]),
            std::string::npos)
      << err;
  expect_nothing_left(err);
}

// Horovod users' deadlock: the job drops below --min-np (hostB's agent killed: 2 of 4 ranks
// left), then hostB comes back (its blacklisting cools down and the script still names it)
// within --elastic-timeout. hvrun starts a new agent there and the job resumes on four ranks.
TEST_F(ElasticHostsTest, BelowMinNpTheJobResumesWhenTheHostComesBack) {
  const std::string hosts = hosts_file("back-hosts", "hostA:2\nhostB:2\n");
  auto p = start_logged(job({"-np", "4", "-H", "hostA:2,hostB:2", "--min-np", "4",
                             "--host-discovery-script", "cat " + hosts,
                             "--blacklist-cooldown-range", "1", "2"},
                            {{"ELASTIC_EPOCHS", "3"}, {"ELASTIC_STEP_SLEEP", "0.3"}}),
                        dir_, "come-back");
  ASSERT_TRUE(wait_for_output(*p, "STEP 3 SIZE 4", seconds(90)))
      << read_file(p->out_path) << read_file(p->err_path);
  const pid_t agent = hvrun_agent_in(env_["NS_B"]);
  ASSERT_GT(agent, 0) << "no hvrun agent in hostB's namespace";
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  expect_replayed(*p, 4, "4");
  const std::string err = read_file(p->err_path);
  EXPECT_NE(err.find("fewer than --min-np 4; waiting up to 60 s"), std::string::npos) << err;
  EXPECT_NE(err.find("elastic: 2 rank(s) added (hostB slot 0, hostB slot 1)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("elastic: hostB joined"), std::string::npos) << err;
  expect_nothing_left(err);
}

// Below --min-np with no host coming back: hostB's agent is killed, and without a cool-down
// range it stays blacklisted though the script names it; after --elastic-timeout the job fails
// naming what was lost and the failed host.
TEST_F(ElasticHostsTest, BelowMinNpWithNoHostBackTheJobFailsNamingWhatWasLost) {
  const std::string hosts = hosts_file("gone-hosts", "hostA:2\nhostB:2\n");
  // The flags come after job()'s own: this --elastic-timeout wins over its 60 s.
  auto p = start_logged(job({"-np", "4", "-H", "hostA:2,hostB:2", "--min-np", "4",
                             "--elastic-timeout", "3", "--host-discovery-script", "cat " + hosts},
                            {{"ELASTIC_EPOCHS", "3"}, {"ELASTIC_STEP_SLEEP", "0.3"}}),
                        dir_, "gone");
  ASSERT_TRUE(wait_for_output(*p, "STEP 3 SIZE 4", seconds(90)))
      << read_file(p->out_path) << read_file(p->err_path);
  const pid_t agent = hvrun_agent_in(env_["NS_B"]);
  ASSERT_GT(agent, 0) << "no hvrun agent in hostB's namespace";
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  std::optional<int> code = p->wait(seconds(60));
  const std::string err = read_file(p->err_path);
  ASSERT_TRUE(code.has_value()) << err;
  EXPECT_NE(*code, 0) << err;
  EXPECT_NE(err.find("elastic: 2 ranks, fewer than --min-np 4, and no host came back within 3 s "
                     "(--elastic-timeout); lost: the worker started as rank 2 on host hostB"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("; failed hosts: hostB"), std::string::npos) << err;
  expect_nothing_left(err);
}

// A second failure during the reset of the first: hostC's agent is killed, and the process
// started as rank 2 (on hostB) dies as it restores the last commit. The job goes on with the
// three ranks left and finishes with the replayed weights.
TEST_F(ElasticHostsTest, ASecondFailureDuringTheResetLeavesThreeRanks) {
  auto p = start_logged(job({"-np", "6", "-H", "hostA:2,hostB:2,hostC:2", "--min-np", "2"},
                            {{"ELASTIC_EPOCHS", "3"},
                             {"ELASTIC_STEP_SLEEP", "0.3"},
                             {"ELASTIC_KILL_IN_RESTORE", "2"}}),
                        dir_, "second");
  ASSERT_TRUE(wait_for_output(*p, "STEP 3 SIZE 6", seconds(90)))
      << read_file(p->out_path) << read_file(p->err_path);
  const pid_t agent = hvrun_agent_in(env_["NS_C"]);
  ASSERT_GT(agent, 0) << "no hvrun agent in hostC's namespace";
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  expect_replayed(*p, 3, "6,3");
  const std::string out = read_file(p->out_path), err = read_file(p->err_path);
  EXPECT_NE(out.find("KILLING myself (launched as rank 2) in restore"), std::string::npos) << out;
  EXPECT_NE(err.find("the worker started as rank 2 on host hostB"), std::string::npos) << err;
  expect_nothing_left(err);
}

// Hot spares across hosts: four ranks on hostA and hostB, and two spares that the discovery
// script's other slots put on hostC (its agent started over ssh). hostB's agent is SIGKILLed:
// both its ranks' places go to the spares on hostC, the world size stays 4 throughout, and the
// weights match the replay; the third slot on hostC becomes a new spare.
TEST_F(ElasticHostsTest, ALostHostsRanksAreReplacedBySparesOnAnotherHost) {
  const std::string hosts = hosts_file("spare-hosts", "hostA:2\nhostB:2\nhostC:2\n");
  auto p = start_logged(job({"-np", "4", "-H", "hostA:2,hostB:2", "--spares", "2",
                             "--host-discovery-script", "cat " + hosts},
                            {{"ELASTIC_EPOCHS", "3"}, {"ELASTIC_STEP_SLEEP", "0.3"}}),
                        dir_, "spares");
  ASSERT_TRUE(wait_for_output(*p, "2 spare(s) ready", seconds(90)))
      << read_file(p->out_path) << read_file(p->err_path);
  ASSERT_TRUE(wait_for_output(*p, "STEP 3 SIZE 4", seconds(90)))
      << read_file(p->out_path) << read_file(p->err_path);
  hosts_file("spare-hosts", "hostA:2\nhostB:2\nhostC:3\n");
  const pid_t agent = hvrun_agent_in(env_["NS_B"]);
  ASSERT_GT(agent, 0) << "no hvrun agent in hostB's namespace";
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  expect_replayed(*p, 4, "4");
  const std::string err = read_file(p->err_path);
  EXPECT_NE(err.find("elastic: spare(s) started (hostC slot 0, hostC slot 1), parked until a "
                     "rank is lost; 2 spare(s) ready"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("blacklisted: hostB (1 failure, blacklisted for the rest of the job); "
                     "spare(s) in the lost ranks' place: the worker started as rank 4 on host "
                     "hostC, rank 5 on host hostC; 4 ranks, 0 spare(s) left"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("elastic: spare(s) started (hostC slot 2)"), std::string::npos) << err;
  expect_nothing_left(err);
}

// --replace-stragglers across hosts: the slow rank on hostB is stopped through its agent
// (SIGTERM) and the spare on hostC takes its place at the next membership; the world size stays
// 4, no host is blacklisted (a slow rank's host did not fail), and the weights match the replay.
TEST_F(ElasticHostsTest, AStragglerIsReplacedByASpareOnAnotherHostWhenAsked) {
  auto p = start_logged(straggler_job({"--replace-stragglers", "--straggler-replace-ms", "20",
                                       "--straggler-replace-window", "10"}),
                        dir_, "straggler");
  expect_replayed(*p, 4, "4");
  const std::string err = read_file(p->err_path);
  EXPECT_NE(err.find("elastic: spare(s) started (hostC slot 0), parked until a rank is lost; 1 "
                     "spare(s) ready"),
            std::string::npos)
      << err;
  std::smatch found;
  ASSERT_TRUE(std::regex_search(
      err, found,
      std::regex(R"(elastic: rank 2 on host hostB \(the worker started as rank 2, pid \d+\) was )"
                 R"(last by 20\.0 ms or more in (\d+) of the last 10 steps, ([\d.]+) ms late )"
                 R"(at the median \(--replace-stragglers\): stopping it \(SIGTERM\); a spare )"
                 R"(takes its place)")))
      << err;
  EXPECT_GT(std::stoi(found[1].str()), 5) << err;
  EXPECT_GE(std::stod(found[2].str()), 20.0) << err;
  EXPECT_NE(err.find("elastic: the worker started as rank 2 on host hostB was stopped as a "
                     "straggler; spare(s) in the lost ranks' place: the worker started as rank 4 "
                     "on host hostC; 4 ranks, 0 spare(s) left"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("blacklisted"), std::string::npos) << err;
  expect_nothing_left(err);
}

// The same slow rank is never stopped otherwise: without --replace-stragglers, or with a
// threshold its lateness never reaches.
TEST_F(ElasticHostsTest, AStragglerIsNeverReplacedWithoutTheFlag) { expect_straggler_kept({}); }

TEST_F(ElasticHostsTest, AStragglerIsNeverReplacedBelowTheThreshold) {
  expect_straggler_kept({"--replace-stragglers", "--straggler-replace-ms", "1000",
                         "--straggler-replace-window", "10"});
}

// The script stops naming hostC mid-run: hvrun has hostC's agent stop its two ranks (SIGTERM),
// the others reset from their last commit and finish on four ranks; hostC is not blacklisted.
TEST_F(ElasticHostsTest, AHostTheScriptNoLongerListsIsWithdrawn) {
  const std::string hosts = hosts_file("shrink-hosts", "hostA:2\nhostB:2\nhostC:2\n");
  auto p = start_logged(job({"-np", "6", "-H", "hostA:2,hostB:2,hostC:2", "--min-np", "2",
                             "--host-discovery-script", "cat " + hosts},
                            {{"ELASTIC_EPOCHS", "3"},
                             {"ELASTIC_STEP_SLEEP", "0.2"},
                             {"ELASTIC_GROW", hosts + ":3:hostA:2,hostB:2"}}),
                        dir_, "shrink");
  expect_replayed(*p, 4, "6,4");
  const std::string err = read_file(p->err_path);
  EXPECT_NE(err.find("the discovery script no longer lists the slots of process(es) 4, 5: "
                     "stopping them"),
            std::string::npos)
      << err;
  // Each exit is taken as it comes (a membership change each; the second moves the first's
  // rendezvous on).
  for (const char* rank : {"4", "5"})
    EXPECT_NE(err.find(std::string("elastic: withdrawn, the discovery script no longer lists them: "
                                   "the worker started as rank ") +
                       rank + " on host hostC"),
              std::string::npos)
        << err;
  EXPECT_NE(err.find("; 4 ranks left"), std::string::npos) << err;
  EXPECT_EQ(err.find("blacklisted"), std::string::npos) << err;
  expect_nothing_left(err);
}

// A discovered host that cannot be reached (an address of the hosts' network that nobody has:
// ssh gives up) loses the ranks planned there: the host is blacklisted and the job finishes on
// the four it had.
TEST_F(ElasticHostsTest, AnUnreachableDiscoveredHostIsBlacklistedAndTheJobGoesOn) {
  const std::string nobody = "10.231.0.9";
  const std::string hosts = hosts_file("bad-hosts", "hostA:2\nhostB:2\n" + nobody + ":2\n");
  auto p = start_logged(job({"-np", "4", "-H", "hostA:2,hostB:2", "--max-np", "6",
                             "--host-discovery-script", "cat " + hosts},
                            {{"ELASTIC_EPOCHS", "3"}, {"ELASTIC_STEP_SLEEP", "0.2"}}),
                        dir_, "unreachable");
  expect_replayed(*p, 4, "4");
  const std::string err = read_file(p->err_path);
  EXPECT_NE(err.find("the worker planned as rank 4 on host " + nobody + " was never started (host " +
                     nobody + ": ssh failed: "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("blacklisted: " + nobody + " (1 failure, blacklisted for the rest of the "
                     "job); 4 ranks left"),
            std::string::npos)
      << err;
  expect_nothing_left(err);
}

}  // namespace
}  // namespace hvrun::test
