// Where an elastic job's new ranks start, and how a job whose training finished ends, across two
// hosts made of network namespaces (scripts/netns-cluster up DIR 2: hostA and hostB, a real sshd
// each, in a UTS namespace of its own: a process started over ssh on hostB sees hostname hostB).
// hvrun runs in hostA's namespace, started as a one-host job (-H localhost:2): the discovery
// script later names hostB. The trainer is elastic_grow_job.cc (C++, no Python needed).
//
// Every wait is bounded; every process is found and killed by pid.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
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

using std::chrono::seconds;

class ElasticPlacementTest : public NamespaceHostsTest<ElasticPlacementTest> {
 public:
  static constexpr const char* kScript = "netns-cluster";
  static constexpr const char* kWhat = "two-host harness";

 protected:
  void TearDown() override {
    for (pid_t pid : our_trainers()) ::kill(pid, SIGKILL);
  }

  // The trainers running in this suite's namespaces.
  static std::vector<pid_t> our_trainers() {
    const std::vector<std::string> ours = {netns_of_name(env_["NS_A"]),
                                           netns_of_name(env_["NS_B"])};
    std::vector<pid_t> out;
    for (pid_t pid : all_pids()) {
      if (is_zombie(pid)) continue;
      bool trainer = false;
      for (const std::string& word : cmdline_of(pid))
        trainer |= word.find("hvrun_elastic_grow_job") != std::string::npos;
      if (!trainer) continue;
      const std::string ns = netns_of_pid(pid);
      for (const std::string& o : ours)
        if (ns == o) out.push_back(pid);
    }
    return out;
  }

  // hvrun in hostA's namespace: two ranks on this machine ("localhost"), growing through
  // `hosts` (the discovery script's input), then `flags`; the trainer gets `trainer_env`.
  static std::vector<std::string> job(const std::string& hosts, const std::vector<std::string>& flags,
                                      const std::map<std::string, std::string>& trainer_env) {
    std::vector<std::string> argv = {
        ip_command(), "netns", "exec", env_["NS_A"], bin_path("hvrun"), "-p", env_["SSH_PORT"],
        "-i", env_["KEY"], "--rsh", kNamespaceRsh, "--start-timeout", "30",
        // Started on hostA alone, hvrun has no peer to probe which of hostA's interfaces hostB
        // will reach (each host has a decoy nobody routes to): the ranks' network is named.
        "--network-interface", env_["IFACE_A"] + "," + env_["IFACE_B"], "-np", "2", "-H", "localhost:2", "--host-discovery-script", "cat " + hosts};
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const auto& [k, v] : trainer_env) {
      argv.push_back("-x");
      argv.push_back(k + "=" + v);
    }
    argv.push_back(bin_path("hvrun_elastic_grow_job"));
    return argv;
  }

  static std::string hosts_file(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // Within 5 s: no trainer and no agent left in either namespace.
  static void expect_nothing_left(const std::string& context) {
    const auto gone_by = std::chrono::steady_clock::now() + seconds(5);
    auto any = [] {
      return !our_trainers().empty() || hvrun_agent_in(env_["NS_A"]) > 0 ||
             hvrun_agent_in(env_["NS_B"]) > 0;
    };
    while (std::chrono::steady_clock::now() < gone_by && any()) ::usleep(50000);
    EXPECT_TRUE(our_trainers().empty()) << context;
    EXPECT_EQ(hvrun_agent_in(env_["NS_B"]), -1) << context;
  }
};

// A job begun on this machine alone grows to hostB when the script names it: the new rank starts
// on hostB, through an agent hvrun starts there over ssh (its hostname says so), waits for the
// next membership and trains with the others to the end.
TEST_F(ElasticPlacementTest, ARankDiscoveredOnAnotherHostStartsThere) {
  const std::string hosts = hosts_file("grow-hosts", "localhost:2\n");
  auto p = start_logged(job(hosts, {"--max-np", "3", "--elastic-timeout", "30"},
                            {{"ELASTIC_STEPS", "40"},
                             {"ELASTIC_STEP_MS", "150"},
                             {"ELASTIC_GROW", hosts + ":3:localhost:2,hostB:1"}}),
                        dir_, "grow-to-b");
  std::optional<int> code = p->wait(seconds(90));
  const std::string out = read_file(p->out_path), err = read_file(p->err_path);
  ASSERT_TRUE(code.has_value()) << "hvrun still running after 90 s\n" << out << err;
  EXPECT_EQ(*code, 0) << out << err;
  EXPECT_NE(err.find("elastic: starting the agent of hostB"), std::string::npos) << err;
  EXPECT_NE(err.find("elastic: hostB joined"), std::string::npos) << err;
  // The process started as rank 2 runs on hostB and joined a membership of three.
  EXPECT_TRUE(std::regex_search(out, std::regex("MEMBER launched-as 2 host hostB rank 2 size 3")))
      << out << err;
  // The first two ran here, not on hostB.
  EXPECT_TRUE(std::regex_search(out, std::regex("MEMBER launched-as 0 host (?!hostB)\\S+ rank 0 "
                                                "size 2")))
      << out;
  EXPECT_NE(out.find("DONE size 3 total"), std::string::npos) << out << err;
  EXPECT_EQ(err.find("blacklisted"), std::string::npos) << err;
  expect_nothing_left(err);
}

// The script names 10,000 hosts (and more slots here) while --max-np 2 leaves no room: nothing is
// started, no agent, no ssh; the job finishes on its two ranks, about as fast as without them.
TEST_F(ElasticPlacementTest, AFloodOfDiscoveredHostsBeyondMaxNpStartsNothing) {
  std::string flood = "localhost:4\n";
  for (int i = 0; i < 10000; ++i) flood += "node" + std::to_string(i) + ":8\n";
  const std::string hosts = hosts_file("flood-hosts", flood);
  const auto started = std::chrono::steady_clock::now();
  auto p = start_logged(job(hosts, {"--max-np", "2", "--elastic-timeout", "30"},
                            {{"ELASTIC_STEPS", "30"}, {"ELASTIC_STEP_MS", "100"}}),
                        dir_, "flood");
  std::optional<int> code = p->wait(seconds(60));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string out = read_file(p->out_path), err = read_file(p->err_path);
  ASSERT_TRUE(code.has_value()) << "hvrun still running after 60 s\n" << out << err;
  EXPECT_EQ(*code, 0) << out << err;
  EXPECT_EQ(err.find("rank(s) added"), std::string::npos) << err;
  EXPECT_EQ(err.find("starting the agent"), std::string::npos) << err;
  EXPECT_NE(out.find("DONE size 2 total 60"), std::string::npos) << out << err;
  // 30 steps of 0.1 s and the start: far below what 10,000 agents' starts would take.
  EXPECT_LT(took, 30.0) << err;
  expect_nothing_left(err);
}

// The end of training races a new slot: the script offers one (on this host in even runs, on
// hostB in odd ones) only once rank 0's training is over, while the ranks linger. Ten runs, each
// must end with exit 0, the late slot never trained in and no host blacklisted.
TEST_F(ElasticPlacementTest, ASlotOfferedAsTheTrainingEndsDoesNotFailTheJob) {
  for (int run = 0; run < 10; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const std::string hosts =
        hosts_file("late-hosts-" + std::to_string(run), "localhost:2\n");
    const std::string late = run % 2 == 0 ? "localhost:3" : "localhost:2,hostB:1";
    auto p = start_logged(job(hosts, {"--min-np", "1", "--max-np", "3", "--elastic-timeout", "20"},
                              {{"ELASTIC_STEPS", "6"},
                               {"ELASTIC_STEP_MS", "100"},
                               {"ELASTIC_LINGER_MS", "2500"},
                               {"ELASTIC_DONE", hosts + ":" + late}}),
                          dir_, "late-" + std::to_string(run));
    std::optional<int> code = p->wait(seconds(60));
    const std::string out = read_file(p->out_path), err = read_file(p->err_path);
    ASSERT_TRUE(code.has_value()) << "hvrun still running after 60 s\n" << out << err;
    EXPECT_EQ(*code, 0) << out << err;
    EXPECT_NE(out.find("DONE size 2 total 12"), std::string::npos) << out << err;
    EXPECT_EQ(err.find("blacklisted"), std::string::npos) << err;
    EXPECT_EQ(err.find("fewer than --min-np"), std::string::npos) << err;
    expect_nothing_left(err);
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace hvrun::test
