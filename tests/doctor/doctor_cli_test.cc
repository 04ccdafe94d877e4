// The real `hvrun doctor` and `hvrun estimate-memory` binaries on this machine. Where no NVIDIA
// driver is installed (CI, this development machine) the doctor must say so, still list the
// interfaces and NCCL settings, and exit 1; on a GPU machine those assertions are skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

bool driver_installed() {
  return access("/dev/nvidiactl", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0;
}

RunResult doctor(const std::vector<std::string>& args, const RunOptions& options = {}) {
  std::vector<std::string> argv = {bin_path("hvrun"), "doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o = options;
  o.timeout = std::chrono::seconds(60);
  return run_process(argv, o);
}

TEST(DoctorCli, WithoutADriverItSaysSoListsInterfacesAndExits1) {
  if (driver_installed()) GTEST_SKIP() << "this machine has an NVIDIA driver";
  RunOptions o;
  o.env["NCCL_DEBUG"] = "WARN";
  o.env["NCCL_SOCKET_IFNAME"] = std::nullopt;
  RunResult r = doctor({}, o);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("NVIDIA driver   none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[warning] no NVIDIA driver on this machine"), std::string::npos);
  EXPECT_NE(r.out.find("Network interfaces"), std::string::npos);
  EXPECT_NE(r.out.find("\n  lo "), std::string::npos) << r.out;  // loopback is always there
  EXPECT_NE(r.out.find("NCCL would use: "), std::string::npos);
  EXPECT_NE(r.out.find("NCCL_DEBUG=WARN   (environment)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/etc/nccl.conf"), std::string::npos);
}

TEST(DoctorCli, ReadsNcclConfFileAndJudgesALoopbackChoice) {
  char path[] = "/tmp/hvrun-doctor-conf-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "# test\nNCCL_SOCKET_IFNAME==lo\nNCCL_IB_DISABLE=1\n";
  RunOptions o;
  o.env["NCCL_CONF_FILE"] = std::string(path);
  o.env["NCCL_SOCKET_IFNAME"] = std::nullopt;
  RunResult r = doctor({}, o);
  std::remove(path);
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.out.find("NCCL_SOCKET_IFNAME==lo   (" + std::string(path) + ")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL_IB_DISABLE=1"), std::string::npos);
  EXPECT_NE(r.out.find("NCCL would use: lo"), std::string::npos);
  EXPECT_NE(r.out.find("[warning] NCCL would use lo (loopback)"), std::string::npos) << r.out;
  EXPECT_GE(r.exit_code, 1);
}

TEST(DoctorCli, HostsRunThroughTheLauncher) {
  // localhost: hvrun's single-host path; remote hosts go through ssh and `hvrun agent`
  // (doctor_hosts_test covers two namespace hosts).
  RunResult r = doctor({"-H", "localhost"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.out.find("==== localhost ===="), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("Hosts\n  host "), std::string::npos);
  if (!driver_installed()) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.out.find("  localhost            1     none"), std::string::npos) << r.out;
  }
}

TEST(DoctorCli, FrameworksAreAskedOfPython) {
  RunResult r = doctor({"--frameworks", "--python", "/usr/bin/python3"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.out.find("Frameworks (asked /usr/bin/python3"), std::string::npos) << r.out << r.err;
  RunResult missing = doctor({"--python", "/nonexistent/python3"});
  EXPECT_NE(missing.out.find("Frameworks (could not run /nonexistent/python3 (exit 127))"),
            std::string::npos) << missing.out;
}

TEST(DoctorCli, JsonIsValid) {
  RunResult r = doctor({"--json"});
  ASSERT_FALSE(r.timed_out);
  ASSERT_FALSE(r.out.empty()) << r.err;
  RunOptions check;
  check.stdin_text = r.out;
  RunResult parsed = run_process({"/usr/bin/python3", "-c",
                                  "import json,sys; d=json.load(sys.stdin); "
                                  "print(d['exit_code'], len(d['interfaces']) > 0, d['driver']['present'])"},
                                 check);
  EXPECT_EQ(parsed.exit_code, 0) << parsed.err << "\n" << r.out;
  EXPECT_EQ(parsed.out.substr(0, 1), std::to_string(r.exit_code));
  if (!driver_installed()) {
    EXPECT_NE(parsed.out.find("True False"), std::string::npos) << parsed.out;
  }
}

TEST(DoctorCli, P2pTestAndHosts) {
  if (!driver_installed()) {
    RunResult r = doctor({"--p2p-test"});
    EXPECT_NE(r.out.find("P2P test"), std::string::npos);
    EXPECT_NE(r.out.find("cannot run: no NVIDIA driver"), std::string::npos) << r.out;
  }
  // Hosts that do not exist: hvrun's own pre-flight check names them, the doctor exits 2.
  RunResult h = doctor({"-H", "nosuchhost-doctor-a,nosuchhost-doctor-b"});
  EXPECT_EQ(h.exit_code, 2);
  EXPECT_NE(h.err.find("no host reported"), std::string::npos) << h.err;
  EXPECT_NE(h.err.find("nosuchhost-doctor-a"), std::string::npos) << h.err;
}

TEST(EstimateCli, BertLargeBreakdownAndExitCodes) {
  RunResult r = run_process({bin_path("hvrun"), "estimate-memory", "--model", "bert-large", "--batch",
                             "32", "--precision", "fp32", "--gpu-memory", "16GB"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("335.1 M params"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("55.57 GB"), std::string::npos);
  EXPECT_NE(r.out.find("largest batch per GPU that fits"), std::string::npos);
  RunResult bad = run_process({bin_path("hvrun"), "estimate-memory", "--gpus", "0"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--gpus"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace hvrun::test
