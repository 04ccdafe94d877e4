// The example trainer started by Open MPI's mpirun on two hosts made of network namespaces
// (scripts/netns-cluster: real sshd, each host its own hostname), against an hvrun-coordinator on
// hostA: each worker takes its rank from OMPI_COMM_WORLD_RANK and binds Gloo to the interface
// GLOO_SOCKET_IFNAME names on its host (eth1 on hostA, ens5 on hostB).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/host_processes.h"
#include "tests/support/namespace_hosts.h"
#include "tests/support/subprocess.h"
#include "tests/worker/train_output.h"

namespace hvrun::test {
namespace {

using std::chrono::seconds;

std::string find_mpirun() {
  for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

class MpirunTest : public NamespaceHostsTest<MpirunTest> {
 public:
  static constexpr const char* kScript = "netns-cluster";
  static constexpr const char* kWhat = "multi-host harness";

 protected:
  static void SetUpTestSuite() {
    if (!find_mpirun().empty()) NamespaceHostsTest::SetUpTestSuite();
  }
  void SetUp() override {
    if (find_mpirun().empty()) GTEST_SKIP() << "no mpirun (install openmpi-bin)";
    NamespaceHostsTest::SetUp();
  }


  // hvrun-coordinator for `ranks` ranks on hostA's veth address (its first stdout line: where),
  // with `flags` after its own.
  static ChildProcess start_coordinator(const std::string& secret, int ranks = 4,
                                        const std::vector<std::string>& flags = {}) {
    ChildOptions options;
    options.env["HVRUN_SECRET"] = secret;
    std::vector<std::string> argv = {ip_command(), "netns", "exec", env_["NS_A"],
                                     bin_path("hvrun-coordinator"), "--world-size",
                                     std::to_string(ranks), "--listen", env_["ADDR_A"] + ":0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return ChildProcess(argv, options);
  }

  // mpirun on hostA's namespace, every rank over ssh on `hosts` (-np their slots); Open MPI's
  // own traffic kept on the veth.
  static std::vector<std::string> mpirun_argv(const std::string& coordinator,
                                              const std::vector<std::string>& command,
                                              const std::string& np = "4",
                                              const std::string& hosts = "hostA:2,hostB:2") {
    const std::string veth = "10.231.0.0/24";
    std::vector<std::string> argv = {
        ip_command(), "netns", "exec", env_["NS_A"], find_mpirun(), "--allow-run-as-root",
        "--tag-output", "-np", np, "-H", hosts, "--mca", "plm_rsh_agent", "ssh",
        "--mca", "plm_rsh_args",
        "-p " + env_["SSH_PORT"] + " -i " + env_["KEY"] +
            " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        "--mca", "oob_tcp_if_include", veth, "--mca", "btl", "self,tcp", "--mca",
        "btl_tcp_if_include", veth, "-x", "HVRUN_COORDINATOR_ADDR=" + coordinator, "-x",
        "HVRUN_SECRET", "-x", "GLOO_SOCKET_IFNAME=" + env_["IFACE_A"] + "," + env_["IFACE_B"]};
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }

};

TEST_F(MpirunTest, TheTrainerTakesItsRanksFromMpirunAndTrainsAcrossBothHosts) {
  const std::string secret = "mpirun-test-secret";
  ChildProcess coordinator = start_coordinator(secret);
  std::optional<std::string> address = coordinator.read_line(std::chrono::seconds(20));
  ASSERT_TRUE(address.has_value()) << coordinator.err();
  ASSERT_EQ(address->rfind(env_["ADDR_A"] + ":", 0), 0u) << *address;

  RunOptions opts;
  opts.timeout = seconds(90);
  opts.env["HVRUN_SECRET"] = secret;
  RunResult r = run_process(mpirun_argv(*address, {bin_path("train"), "--epochs", "3"}), opts);
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Each rank's hvrun rank is its MPI rank ([1,R] is mpirun's tag for rank R).
  expect_trained_alike(r.out, 4, 3, "[1,");
  std::optional<int> code = coordinator.wait_exit(std::chrono::seconds(10));
  EXPECT_EQ(code, std::optional<int>(0)) << coordinator.err();
}

// A job mpirun started gets its autopsy from the standalone coordinator as from hvrun: rank 1
// (on hostB) blocks in read() before its step 3; at the stall warning the coordinator prints the
// verdict, naming the function and line, and writes the report files.
TEST_F(MpirunTest, TheStandaloneCoordinatorGivesTheAutopsyVerdictAndReport) {
  const std::string secret = "mpirun-autopsy-secret";
  const std::string autopsies = dir_ + "/autopsies";
  std::filesystem::create_directories(autopsies);
  ChildProcess coordinator =
      start_coordinator(secret, 2,
                        {"--stall-check-warning-time-seconds", "2", "--autopsy-deadline-seconds",
                         "2", "--autopsy-dir", autopsies, "--heartbeat-timeout", "120"});
  std::optional<std::string> address = coordinator.read_line(std::chrono::seconds(20));
  ASSERT_TRUE(address.has_value()) << coordinator.err();
  ChildOptions job_options;
  job_options.env["HVRUN_SECRET"] = secret;
  ChildProcess job(mpirun_argv(*address, {bin_path("hvrun_autopsy_worker"), "pipe"}, "2",
                               "hostA:1,hostB:1"),
                   job_options);
  const auto limit = std::chrono::steady_clock::now() + seconds(60);
  const std::string report_line = "full report in ";
  while (std::chrono::steady_clock::now() < limit &&
         coordinator.err().find(report_line) == std::string::npos) {
    coordinator.pump(std::chrono::milliseconds(50));
    job.pump(std::chrono::milliseconds(10));
  }
  coordinator.pump(std::chrono::milliseconds(200));
  job.stop(seconds(5));
  coordinator.stop(seconds(5));
  const std::string err = coordinator.err();
  const std::string head = "hvrun-coordinator: autopsy: ";
  const size_t at = err.find(head);
  ASSERT_NE(at, std::string::npos) << err << job.out() << job.err();
  const std::string verdict = err.substr(at + head.size(), err.find('\n', at) - at - head.size());
  std::cerr << "[mpi] autopsy: " << verdict << "\n";
  EXPECT_EQ(verdict.rfind("rank 1 on hostB has not submitted '", 0), 0u) << verdict;
  EXPECT_NE(verdict.find(" block_in_read"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("(sleeping in read)"), std::string::npos) << verdict;
  const size_t files = err.find(report_line);
  ASSERT_NE(files, std::string::npos) << err;
  const std::string paths = err.substr(files + report_line.size(),
                                       err.find('\n', files) - files - report_line.size());
  const std::string json = paths.substr(paths.find(" and ") + 5);
  EXPECT_EQ(json.rfind(autopsies + "/hvrun-autopsy-", 0), 0u) << json;
  EXPECT_NE(read_file(json).find("block_in_read"), std::string::npos) << json;
}

// Open MPI's settings for these hosts, as variables (hvrun --mpi passes its environment on).
RunOptions hvrun_mpi_options(const std::map<std::string, std::string>& cluster) {
  RunOptions opts;
  opts.timeout = seconds(90);
  opts.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
  opts.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  opts.env["OMPI_MCA_plm_rsh_agent"] = "ssh";
  opts.env["OMPI_MCA_plm_rsh_args"] =
      "-p " + cluster.at("SSH_PORT") + " -i " + cluster.at("KEY") +
      " -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR";
  opts.env["OMPI_MCA_oob_tcp_if_include"] = "10.231.0.0/24";
  opts.env["OMPI_MCA_btl_tcp_if_include"] = "10.231.0.0/24";
  return opts;
}

TEST_F(MpirunTest, HvrunMpiHandsATwoHostJobToMpirun) {
  RunResult r = run_process(
      {ip_command(), "netns", "exec", env_["NS_A"], bin_path("hvrun"), "--mpi", "--verbose", "-np",
       "4", "-H", "hostA:2,hostB:2", "--network-interface",
       env_["IFACE_A"] + "," + env_["IFACE_B"], "--mpi-args", "--mca btl 'self,tcp'",
       bin_path("train"), "--epochs", "3"},
      hvrun_mpi_options(env_));
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_trained_alike(r.out, 4, 3, "[1,");
  EXPECT_NE(r.err.find("-H hostA:2,hostB:2 --bind-to none --map-by slot --tag-output"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("-x HVRUN_SECRET"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("HVRUN_SECRET="), std::string::npos) << "the secret is never in argv";
  EXPECT_NE(r.err.find("--mca btl self,tcp"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("listening on " + env_["ADDR_A"] + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mpirun exited 0"), std::string::npos) << r.err;
}

TEST_F(MpirunTest, HvrunMpiAcrossHostsWithoutAnInterfaceSaysWhatToGive) {
  RunResult r = run_process({ip_command(), "netns", "exec", env_["NS_A"], bin_path("hvrun"),
                             "--mpi", "-np", "2", "-H", "hostA:1,hostB:1", bin_path("train")},
                            hvrun_mpi_options(env_));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--mpi across hosts needs --network-interface"), std::string::npos)
      << r.err;
}

TEST_F(MpirunTest, APyTorchScriptTrainsUnderMpirun) {
#ifndef HVRUN_TEST_PYTHON
  GTEST_SKIP() << "no project Python environment (scripts/install-deps)";
#else
  RunResult has_torch = run_process({HVRUN_TEST_PYTHON, "-c", "import torch"});
  if (has_torch.exit_code != 0) GTEST_SKIP() << "the project's Python has no torch";
  const std::string secret = "mpirun-torch-secret";
  ChildProcess coordinator = start_coordinator(secret);
  std::optional<std::string> address = coordinator.read_line(std::chrono::seconds(20));
  ASSERT_TRUE(address.has_value()) << coordinator.err();

  RunOptions opts;
  opts.timeout = seconds(120);
  opts.env["HVRUN_SECRET"] = secret;
  std::vector<std::string> argv = mpirun_argv(
      *address, {"-x", std::string("PYTHONPATH=") + HVRUN_TEST_PYTHONPATH, "-x", "OMP_NUM_THREADS=1",
                 HVRUN_TEST_PYTHON, source_dir() + "/examples/pytorch_synthetic.py", "--epochs",
                 "1", "--train-samples", "64", "--batch-size", "8", "--num-warmup-batches", "1",
                 "--num-batches-per-iter", "1", "--num-iters", "1"});
  RunResult r = run_process(argv, opts);
  ASSERT_FALSE(r.timed_out) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Total img/sec on 4 rank"), std::string::npos) << r.out;
  EXPECT_EQ(coordinator.wait_exit(std::chrono::seconds(10)), std::optional<int>(0))
      << coordinator.err();
#endif
}

}  // namespace
}  // namespace hvrun::test
