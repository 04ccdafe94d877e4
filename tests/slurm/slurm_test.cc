// hvrun inside a Slurm allocation on a real Slurm cluster made of two network-namespace hosts
// (scripts/slurm-cluster): with no -H, the hosts and slots come from the allocation and every
// host's agent is a one-task srun step; a lost worker ends the job naming its node, and nothing
// is left on either node. Also the trainer srun directly against hvrun-coordinator, and hvrun
// refusing to be every task of a step. Every wait is bounded; the cluster is torn down at the
// end.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
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

class SlurmTest : public NamespaceHostsTest<SlurmTest> {
 public:
  static constexpr const char* kScript = "slurm-cluster";
  static constexpr const char* kWhat = "Slurm cluster";

 protected:
  void TearDown() override {
    for (pid_t pid : our_trainers()) ::kill(pid, SIGKILL);
  }

  // `salloc ARGS hvrun HVRUN_ARGS train TRAIN_ARGS`, run on hostA.
  static std::vector<std::string> salloc_hvrun(const std::vector<std::string>& salloc_args,
                                               const std::vector<std::string>& hvrun_args,
                                               const std::vector<std::string>& train_args) {
    std::vector<std::string> argv = {env_["ON_A"], "salloc"};
    argv.insert(argv.end(), salloc_args.begin(), salloc_args.end());
    argv.push_back(bin_path("hvrun"));
    argv.insert(argv.end(), hvrun_args.begin(), hvrun_args.end());
    argv.push_back(bin_path("train"));
    argv.insert(argv.end(), train_args.begin(), train_args.end());
    return argv;
  }

  static std::string train_exe() {
    std::error_code ec;
    auto p = std::filesystem::canonical(bin_path("train"), ec);
    return ec ? bin_path("train") : p.string();
  }

  // `train` processes in hostA's or hostB's namespace (`ns`: only that one).
  static std::vector<pid_t> our_trainers(const std::string& ns = "") {
    const std::string a = netns_of_name(env_["NS_A"]), b = netns_of_name(env_["NS_B"]);
    const std::string only = ns.empty() ? "" : netns_of_name(ns);
    std::vector<pid_t> out;
    for (pid_t pid : processes_running(train_exe())) {
      const std::string in = netns_of_pid(pid);
      if (only.empty() ? (in == a || in == b) : in == only) out.push_back(pid);
    }
    return out;
  }

  // hvrun agents (`hvrun agent`) in either namespace.
  static std::vector<pid_t> our_agents() {
    const std::string a = netns_of_name(env_["NS_A"]), b = netns_of_name(env_["NS_B"]);
    std::vector<pid_t> out;
    for (pid_t pid : all_pids()) {
      auto words = cmdline_of(pid);
      if (words.size() < 2 || words[1] != "agent" || words[0].find("hvrun") == std::string::npos)
        continue;
      const std::string in = netns_of_pid(pid);
      if ((in == a || in == b) && !is_zombie(pid)) out.push_back(pid);
    }
    return out;
  }

};

TEST_F(SlurmTest, SallocHvrunTakesTheAllocationsNodesAndStartsAgentsWithSrun) {
  RunOptions opts;
  opts.timeout = seconds(120);
  auto t0 = Clock::now();
  RunResult r = run_process(salloc_hvrun({"-N2"}, {"-np", "4", "--verbose"}, {"--epochs", "3"}),
                            opts);
  std::cerr << "[slurm] salloc -N2 hvrun -np 4, 3 epochs: "
            << std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count() << " ms\n";
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_trained_alike(r.out, 4, 3);
  // salloc -N2 has no task count: -np 4 is spread over both nodes, and said.
  EXPECT_NE(r.err.find("made without a task count: up to 2 ranks on each of its 2 nodes for -np 4"),
            std::string::npos)
      << r.err;
  for (const char* host : {"hostA", "hostB"})
    EXPECT_NE(r.err.find(std::string("hvrun: ") + host +
                         ": srun --nodes=1 --ntasks=1 --nodelist=" + host),
              std::string::npos)
        << r.err;
  // Ranks 0-1 ran on hostA, 2-3 on hostB, each over its own interface.
  EXPECT_NE(r.err.find("hostB uses " + env_["IFACE_B"] + " " + env_["ADDR_B"]), std::string::npos)
      << r.err;
  EXPECT_TRUE(our_trainers().empty());
}

TEST_F(SlurmTest, AKilledWorkerOnANodeEndsTheJobNamingTheNodeAndLeavesNothing) {
  auto job = start_logged(
      salloc_hvrun({"-N2", "--ntasks-per-node=2"}, {}, {"--epochs", "100000"}), dir_, "kill");
  auto deadline = Clock::now() + seconds(90);
  while (Clock::now() < deadline && epoch_losses(read_file(job->out_path)).empty())
    ::usleep(50000);
  ASSERT_FALSE(epoch_losses(read_file(job->out_path)).empty())
      << "no epoch within 90 s\n"
      << read_file(job->out_path) << read_file(job->err_path);
  EXPECT_NE(read_file(job->err_path).find("hosts from Slurm allocation"), std::string::npos);
  std::vector<pid_t> on_b = our_trainers(env_["NS_B"]);
  ASSERT_EQ(on_b.size(), 2u) << read_file(job->err_path);
  ASSERT_EQ(::kill(on_b[0], SIGKILL), 0);

  std::optional<int> code = job->wait(seconds(30));
  const std::string err = read_file(job->err_path);
  ASSERT_TRUE(code.has_value()) << "hvrun (under salloc) still running 30 s after the kill\n"
                                << err;
  EXPECT_EQ(*code, 128 + SIGKILL) << err;  // the killed rank's own end, as on one host
  size_t failed = err.find("hvrun: job failed: ");
  ASSERT_NE(failed, std::string::npos) << err;
  // The summary names the rank that was killed, on its node, as the first failure.
  const size_t first = err.find("was killed by SIGKILL  <- first failure", failed);
  ASSERT_NE(first, std::string::npos) << err;
  const size_t line_start = err.rfind('\n', first) + 1;
  const std::string victim_line = err.substr(line_start, first - line_start);
  EXPECT_NE(victim_line.find(" hostB "), std::string::npos) << victim_line;
  EXPECT_NE(victim_line.find(" " + std::to_string(on_b[0]) + " "), std::string::npos)
      << victim_line;

  auto gone_by = Clock::now() + seconds(10);
  while (Clock::now() < gone_by && (!our_trainers().empty() || !our_agents().empty()))
    ::usleep(50000);
  EXPECT_TRUE(our_trainers().empty()) << err;
  EXPECT_TRUE(our_agents().empty()) << err;
}

TEST_F(SlurmTest, SrunOfTheTrainerAgainstHvrunCoordinatorTrainsWithSlurmsRanks) {
  // The batch-script form: the coordinator on the first node, then srun of the trainer itself;
  // each task's rank is its SLURM_PROCID.
  const std::string script = dir_ + "/direct.sh";
  {
    std::ofstream out(script);
    const std::string addr_file = dir_ + "/coordinator.addr";
    out << "#!/bin/sh\nexport HVRUN_SECRET=direct-launch-secret\n"
        << bin_path("hvrun-coordinator") << " --world-size $SLURM_NTASKS --listen "
        << env_["ADDR_A"] << ":0 > " << addr_file << " &\n"
        << "trap 'kill $! 2>/dev/null' EXIT\n"
        << "timeout 30 sh -c 'until [ -s " << addr_file << " ]; do sleep 0.05; done' || exit 1\n"
        << "export HVRUN_COORDINATOR_ADDR=$(head -n 1 " << addr_file << ")\n"
        << "export GLOO_SOCKET_IFNAME=" << env_["IFACE_A"] << "," << env_["IFACE_B"] << "\n"
        << "srun --label " << bin_path("train") << " --epochs 3\n";
  }
  ::chmod(script.c_str(), 0755);
  RunOptions opts;
  opts.timeout = seconds(90);
  RunResult r = run_process({env_["ON_A"], "salloc", "-N2", "--ntasks-per-node=2", script}, opts);
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // srun's label is the task's SLURM_PROCID: it must be the hvrun rank.
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_NE(r.out.find(std::to_string(rank) + ": rank " + std::to_string(rank) +
                         ": weights identical on all 4 ranks"),
              std::string::npos)
        << r.out;
  EXPECT_EQ(epoch_losses(r.out).size(), 3u) << r.out;
}

TEST_F(SlurmTest, HvrunAsEveryTaskOfAStepIsRefusedAtOnce) {
  RunOptions opts;
  opts.timeout = seconds(60);
  RunResult r = run_process({env_["ON_A"], "srun", "-N2", "--ntasks-per-node=1", bin_path("hvrun"),
                             "-np", "2", bin_path("train")},
                            opts);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("of the 2 tasks of srun step"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("each would start its own job"), std::string::npos) << r.err;
  EXPECT_TRUE(our_trainers().empty());
}

TEST(SlurmLauncherTest, SrunOutsideAnAllocationIsRefusedInOneLine) {
  RunOptions opts;
  opts.env["SLURM_JOB_ID"] = std::nullopt;
  opts.env["SLURM_JOB_NODELIST"] = std::nullopt;
  RunResult r = run_process({bin_path("hvrun"), "--remote-launcher", "srun", "-np", "1", "true"},
                            opts);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(split_lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--remote-launcher srun needs a Slurm allocation"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace hvrun::test
