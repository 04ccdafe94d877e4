// `hvrun doctor -H`: host lists, per-host output parsing and the summary (pure), then the real
// binary over two hosts made of network namespaces (scripts/netns-cluster, real sshd and
// agents; skipped with the reason where that needs root or sshd).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "launcher/doctor/hosts_doctor.h"
#include "tests/support/subprocess.h"

namespace hvrun::doctor {
namespace {

TEST(DoctorHosts, HostListDropsSlotsAndDuplicates) {
  auto h = doctor_hosts("a:2,b,a,c:1");
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(*h, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(doctor_hosts("a,,b").is_ok());
  EXPECT_FALSE(doctor_hosts(":2").is_ok());
}

TEST(DoctorHosts, ReportAndExitLineAreSplit) {
  HostReport r = parse_host_output("n1", "hvrun doctor on n1\n  NVIDIA driver   580.65.06 (CUDA 13.0 and older)\n"
                                         "  NCCL            built with 2.28.9; at run time 2.28.9 (/usr/lib/libnccl.so.2)\n"
                                         "  NCCL would use: ib0 (NCCL_SOCKET_IFNAME unset: ...)\n"
                                         "hvrun-doctor-exit=1\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.report.find("hvrun-doctor-exit"), std::string::npos);
  HostReport missing = parse_host_output("n2", "");
  EXPECT_EQ(missing.exit_code, -1);
  std::string summary = host_summary({r, missing});
  EXPECT_NE(summary.find("n1                   1     580.65.06      2.28.9         ib0"),
            std::string::npos) << summary;
  EXPECT_NE(summary.find("ib0"), std::string::npos);
  EXPECT_NE(summary.find("n2                   -"), std::string::npos) << summary;
}

TEST(DoctorHosts, DifferentNcclVersionsAcrossHostsAreAnError) {
  HostReport a = parse_host_output("a", "  NCCL            built with none; at run time 2.28.9 (/x/libnccl.so.2)\n"
                                        "  CUDA runtime    built with none; at run time 13.0 (/x)\nhvrun-doctor-exit=1\n");
  HostReport b = parse_host_output(
      "b", "{\"cuda_runtime\":{\"found\":true,\"version\":\"13.0\"},\"nccl_runtime\":{\"found\":true,"
           "\"version\":\"2.18.1\",\"code\":21801}}\nhvrun-doctor-exit=0\n");
  EXPECT_EQ(reported_library_version(a, "nccl"), "2.28.9");
  EXPECT_EQ(reported_library_version(b, "nccl"), "2.18.1");
  EXPECT_EQ(reported_library_version(b, "cuda"), "13.0");
  auto v = cross_host_verdicts({a, b});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].id, "hosts-nccl-differ");
  EXPECT_EQ(v[0].severity, Severity::kError);
  EXPECT_NE(v[0].reason.find("2.18.1 on b; 2.28.9 on a"), std::string::npos) << v[0].reason;
  EXPECT_TRUE(cross_host_verdicts({a, a}).empty());
}

}  // namespace
}  // namespace hvrun::doctor

namespace hvrun::test {
namespace {

const char* kRsh =
    "ssh -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
    "-o KexAlgorithms=curve25519-sha256";

std::string ip_command() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (std::filesystem::exists(p)) return p;
  return "ip";
}

TEST(DoctorHostsCluster, EveryHostReportsThroughTheAgents) {
  char tmpl[] = "/tmp/hvrun-doctor-cluster-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(60);
  RunResult up = run_process({source_dir() + "/scripts/netns-cluster", "up", dir}, opts);
  if (up.exit_code == 77) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "multi-host harness unavailable: " << up.err;
  }
  std::map<std::string, std::string> env;
  for (const std::string& line : split_lines(up.out))
    if (size_t eq = line.find('='); eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  RunResult r;
  if (up.exit_code == 0) {
    RunOptions run;
    run.timeout = std::chrono::seconds(90);
    r = run_process({ip_command(), "netns", "exec", env["NS_A"], bin_path("hvrun"), "doctor", "-H",
                     "hostA,hostB", "-p", env["SSH_PORT"], "-i", env["KEY"], "--rsh", kRsh,
                     "--start-timeout", "60"},
                    run);
  }
  RunOptions down;
  down.timeout = std::chrono::seconds(30);
  run_process({source_dir() + "/scripts/netns-cluster", "down", dir}, down);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(up.exit_code, 0) << up.err;
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.out.find("==== hostA ===="), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("==== hostB ===="), std::string::npos);
  // The doctor runs with the environment hvrun gives a job's ranks: the interface hvrun chose
  // as NCCL_SOCKET_IFNAME
  // (the veth both hosts reach, whose name may differ per host; never eth0, the decoy).
  for (const char* host : {"A", "B"}) {
    const std::string name = std::string("host") + host;
    const std::string iface = env.count(std::string("IFACE_") + host) ? env[std::string("IFACE_") + host] : "eth1";
    std::string line;
    for (const std::string& l : split_lines(r.out))
      if (l.rfind("  " + name + " ", 0) == 0) line = l;
    ASSERT_FALSE(line.empty()) << name << " missing from the summary:\n" << r.out;
    EXPECT_EQ(line.substr(line.size() - iface.size()), iface) << line;
  }
  EXPECT_NE(r.out.find("Hosts\n"), std::string::npos);
  EXPECT_EQ(r.out.find("no report came back"), std::string::npos) << r.out << r.err;
  // Without a driver each host warns (exit 1); with one, at least it reported (0..2).
  EXPECT_GE(r.exit_code, 0);
  EXPECT_LE(r.exit_code, 2);
}

}  // namespace
}  // namespace hvrun::test
