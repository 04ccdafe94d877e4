// Every doctor verdict, from scripted machines (machines.h); no GPU needed.
#include "launcher/doctor/verdicts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "tests/doctor/machines.h"

namespace hvrun::doctor {
namespace {

using test::cpu_build;
using test::cuda_build;
using test::healthy;
using test::iface;

// A copy: the verdict list is often a temporary.
std::optional<Verdict> find(const std::vector<Verdict>& v, const std::string& id) {
  auto it = std::find_if(v.begin(), v.end(), [&](const Verdict& x) { return x.id == id; });
  if (it == v.end()) return std::nullopt;
  return *it;
}

TEST(DoctorVerdicts, HealthyMachineHasNothingToSay) {
  auto v = diagnose(healthy(), cuda_build());
  EXPECT_EQ(exit_code(v), 0);
  for (const Verdict& x : v) EXPECT_EQ(x.severity, Severity::kInfo) << x.id << ": " << x.title;
}

TEST(DoctorVerdicts, NoDriverIsAWarningThatSaysSo) {
  MachineDescription m;
  m.driver.why_absent = "libnvidia-ml.so.1 not found, libcuda.so.1 not found";
  m.interfaces = {iface("lo", "127.0.0.1/8", true), iface("eth0", "10.0.0.5/24")};
  auto v = diagnose(m, cpu_build());
  auto d = find(v, "no-driver");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_NE(d->reason.find("libnvidia-ml.so.1 not found"), std::string::npos);
  EXPECT_EQ(exit_code(v), 1);
}

TEST(DoctorVerdicts, DriverBelowTheCuda13FloorIsAnError) {
  MachineDescription m = healthy();
  m.driver.version = "550.54.14";
  m.driver.cuda_driver_version = 12040;
  auto v = diagnose(m, cuda_build());
  auto d = find(v, "driver-below-floor");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_NE(d->reason.find(">= 580"), std::string::npos) << d->reason;
  EXPECT_NE(d->reason.find("CUDA up to 12.4"), std::string::npos) << d->reason;
  EXPECT_EQ(exit_code(v), 2);
}

TEST(DoctorVerdicts, Cuda12RuntimeNeedsDriver525_60_13) {
  MachineDescription m = healthy();
  m.cuda_runtime = {true, "libcudart.so.12", "12.2", 12020, ""};
  m.driver.version = "520.61.05";
  m.driver.cuda_driver_version = 0;  // unknown: the version number alone decides
  auto v = diagnose(m, cpu_build());
  auto d = find(v, "driver-below-floor");
  ASSERT_TRUE(d);
  EXPECT_NE(d->reason.find("525.60.13"), std::string::npos) << d->reason;
  m.driver.version = "525.60.13";
  EXPECT_FALSE(find(diagnose(m, cpu_build()), "driver-below-floor"));
}

TEST(DoctorVerdicts, MinorVersionCompatibilityIsAWarning) {
  MachineDescription m = healthy();
  m.driver.version = "580.10.02";  // >= 580 (runs CUDA 13.x) but below 13.0's 580.65.06
  auto v = diagnose(m, cuda_build());
  EXPECT_FALSE(find(v, "driver-below-floor"));
  auto d = find(v, "driver-below-full-feature");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_NE(d->reason.find("580.65.06"), std::string::npos);
}

TEST(DoctorVerdicts, TheBuildsCudaCountsWhenNoRuntimeIsFound) {
  MachineDescription m = healthy();
  m.cuda_runtime = {};
  m.driver.version = "530.30.02";
  m.driver.cuda_driver_version = 12010;
  BuildFacts b{true, "12.2", 22809, "2.28.9", 75};
  auto v = diagnose(m, b);
  auto d = find(v, "driver-below-full-feature");  // 12.2 wants 535.54.03
  ASSERT_TRUE(d);
  EXPECT_NE(d->reason.find("535.54.03"), std::string::npos);
}

TEST(DoctorVerdicts, AFrameworksOwnCudaIsCheckedAgainstTheDriver) {
  MachineDescription m = healthy();
  m.driver.version = "570.86.10";  // CUDA 12.8: fine for a PyTorch cu128 wheel
  m.driver.cuda_driver_version = 12080;
  m.cuda_runtime = {};
  m.frameworks = {{"PyTorch", "2.11.0", "12.8", "91002", "2.28.9"}};
  EXPECT_FALSE(find(diagnose(m, cpu_build()), "driver-below-floor"));
  // The cu130 wheel of the same PyTorch needs a CUDA 13 driver (>= 580).
  m.frameworks = {{"PyTorch", "2.11.0", "13.0", "", ""}};
  auto d = find(diagnose(m, cpu_build()), "driver-below-floor");
  ASSERT_TRUE(d);
  EXPECT_NE(d->reason.find("PyTorch 2.11.0 (built with CUDA 13.0)"), std::string::npos) << d->reason;
  EXPECT_NE(d->reason.find(">= 580"), std::string::npos);
  // TensorFlow 2.15 (CUDA 12.2) on driver 530: minor-version compatibility only.
  m.driver.version = "530.30.02";
  m.driver.cuda_driver_version = 12010;
  m.frameworks = {{"TensorFlow", "2.15.0", "12.2", "8", ""}};
  d = find(diagnose(m, cpu_build()), "driver-below-full-feature");
  ASSERT_TRUE(d);
  EXPECT_NE(d->reason.find("535.54.03"), std::string::npos);
  // A CPU-only framework asks nothing of the driver.
  m.frameworks = {{"PyTorch", "1.13.0a0", "", "", ""}};
  EXPECT_FALSE(find(diagnose(m, cpu_build()), "driver-below-full-feature"));
}

TEST(DoctorVerdicts, ComputeCapabilityBelowTheBuildIsAnError) {
  MachineDescription m = healthy();
  m.gpus[1].name = "Tesla P100-PCIE-16GB";
  m.gpus[1].cc_major = 6;
  m.gpus[1].cc_minor = 0;
  auto v = diagnose(m, cuda_build());
  auto d = find(v, "compute-capability-too-low");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_NE(d->title.find("GPU 1 (Tesla P100-PCIE-16GB)"), std::string::npos);
  EXPECT_NE(d->reason.find("7.5"), std::string::npos);
  EXPECT_NE(d->fix.find("Turing or newer"), std::string::npos);
  // A build for Hopper only (HVRUN_CUDA_ARCHITECTURES=90) cannot serve an A100: rebuild.
  MachineDescription a100 = healthy(1, "NVIDIA A100-SXM4-80GB");
  a100.gpus[0].cc_major = 8;
  BuildFacts hopper_only = cuda_build();
  hopper_only.min_compute_capability = 90;
  auto r = find(diagnose(a100, hopper_only), "compute-capability-too-low");
  ASSERT_TRUE(r);
  EXPECT_NE(r->fix.find("-DHVRUN_CUDA_ARCHITECTURES=\"80;90\""), std::string::npos) << r->fix;
  // A CPU build only warns: the CUDA 13 runtime found cannot serve this GPU either.
  auto w = find(diagnose(m, cpu_build()), "compute-capability-too-low");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->severity, Severity::kWarning);
}

TEST(DoctorVerdicts, GeForceRecommendsDisablingP2p) {
  MachineDescription m = healthy(2, "NVIDIA GeForce RTX 4090");
  m.pairs.clear();
  test::connect_all(m, true, "OK", 30);
  auto v = diagnose(m, cuda_build());
  auto d = find(v, "geforce-p2p");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_NE(d->fix.find("NCCL_P2P_DISABLE=1"), std::string::npos);
  // Already disabled in the environment, or in /etc/nccl.conf: nothing to recommend.
  m.environment["NCCL_P2P_DISABLE"] = "1";
  v = diagnose(m, cuda_build());
  EXPECT_FALSE(find(v, "geforce-p2p"));
  EXPECT_TRUE(find(v, "p2p-disabled"));
  m.environment.clear();
  m.config_files[1].exists = true;
  m.config_files[1].entries = {{"NCCL_P2P_DISABLE", "1"}};
  EXPECT_FALSE(find(diagnose(m, cuda_build()), "geforce-p2p"));
}

TEST(DoctorVerdicts, OneGeForceGpuHasNoPeerToWorryAbout) {
  EXPECT_FALSE(find(diagnose(healthy(1, "NVIDIA GeForce RTX 3090"), cuda_build()), "geforce-p2p"));
}

TEST(DoctorVerdicts, AcsOnAPcieP2pPathIsSuspect) {
  MachineDescription m = healthy(4, "NVIDIA A100-PCIE-40GB");
  m.pairs.clear();
  test::connect_all(m, true, "OK", 20);  // PCIe only, through several switches
  m.pcie.acs_enabled = true;
  m.pcie.acs_where = "0000:00:01.0";
  auto v = diagnose(m, cuda_build());
  auto d = find(v, "p2p-acs-suspect");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_NE(d->reason.find("ACS is on (bridge 0000:00:01.0)"), std::string::npos) << d->reason;
  EXPECT_NE(d->fix.find("--p2p-test"), std::string::npos);
  EXPECT_NE(d->fix.find("NCCL_P2P_DISABLE=1"), std::string::npos);
  // A VM or the IOMMU raise the same suspicion.
  m.pcie.acs_enabled = false;
  m.pcie.virtual_machine = true;
  m.pcie.hypervisor = "KVM";
  d = find(diagnose(m, cuda_build()), "p2p-acs-suspect");
  ASSERT_TRUE(d);
  EXPECT_NE(d->reason.find("virtual machine (KVM)"), std::string::npos);
  // NVLink pairs do not cross PCIe bridges.
  m.pairs.clear();
  test::connect_all(m, true, "OK", 20, 12);
  EXPECT_FALSE(find(diagnose(m, cuda_build()), "p2p-acs-suspect"));
}

TEST(DoctorVerdicts, DriverDisagreementsAreReported) {
  MachineDescription m = healthy();
  m.pairs.clear();
  test::connect_all(m, true, "chipset not supported", 50);
  EXPECT_TRUE(find(diagnose(m, cuda_build()), "p2p-nvml-disagrees"));
  m.pairs.clear();
  test::connect_all(m, false, "not supported", 50);
  auto d = find(diagnose(m, cuda_build()), "p2p-unavailable");
  ASSERT_TRUE(d);
  EXPECT_NE(d->reason.find("0-1"), std::string::npos);
}

TEST(DoctorVerdicts, NcclPickingLoopbackRecommendsSocketIfname) {
  MachineDescription m = healthy();
  m.interfaces = {iface("lo", "127.0.0.1/8", true), iface("docker0", "172.17.0.1/16"),
                  iface("eth0", "")};  // eth0 has no address: NCCL falls back to docker0
  auto v = diagnose(m, cuda_build());
  auto d = find(v, "nccl-interface-virtual");
  ASSERT_TRUE(d);
  EXPECT_NE(d->title.find("docker0 (docker bridge)"), std::string::npos) << d->title;
  EXPECT_NE(d->fix.find("no other interface"), std::string::npos) << d->fix;
  // Only loopback.
  m.interfaces = {iface("lo", "127.0.0.1/8", true)};
  d = find(diagnose(m, cuda_build()), "nccl-interface-virtual");
  ASSERT_TRUE(d);
  EXPECT_NE(d->title.find("lo (loopback)"), std::string::npos);
}

TEST(DoctorVerdicts, ABridgeNcclDoesNotExcludeGetsAnExactList) {
  MachineDescription m = healthy();
  NetInterface fast = iface("ens1f0", "10.1.0.5/24");
  fast.speed_mbps = 100000;
  NetInterface slow = iface("eth0", "10.0.0.5/24");
  slow.speed_mbps = 1000;
  m.interfaces = {iface("lo", "127.0.0.1/8", true), iface("br-1a2b3c", "172.18.0.1/16"), slow, fast};
  auto d = find(diagnose(m, cuda_build()), "nccl-interface-virtual");
  ASSERT_TRUE(d);
  EXPECT_NE(d->title.find("br-1a2b3c"), std::string::npos);
  EXPECT_NE(d->fix.find("NCCL_SOCKET_IFNAME==ens1f0,eth0"), std::string::npos) << d->fix;
  // With the variable set to exact names the warning goes.
  m.environment["NCCL_SOCKET_IFNAME"] = "=ens1f0";
  EXPECT_FALSE(find(diagnose(m, cuda_build()), "nccl-interface-virtual"));
}

TEST(DoctorVerdicts, ABridgeOverTheOnlyNicCanBeNamedOnPurpose) {
  MachineDescription m = healthy();
  NetInterface br0 = iface("br0", "10.0.0.5/24");
  br0.bridge = true;
  m.interfaces = {iface("lo", "127.0.0.1/8", true), br0, iface("enp1s0", "")};
  auto d = find(diagnose(m, cuda_build()), "nccl-interface-virtual");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_NE(d->fix.find("NCCL_SOCKET_IFNAME==br0"), std::string::npos) << d->fix;
  m.environment["NCCL_SOCKET_IFNAME"] = "=br0";
  d = find(diagnose(m, cuda_build()), "nccl-interface-virtual");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kInfo);
  m.environment["NCCL_SOCKET_IFNAME"] = "=lo";  // loopback on purpose still cannot go multi-host
  d = find(diagnose(m, cuda_build()), "nccl-interface-virtual");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kWarning);
}

TEST(DoctorVerdicts, SocketIfnameMatchingNothingIsAnError) {
  MachineDescription m = healthy();
  m.environment["NCCL_SOCKET_IFNAME"] = "ib";
  auto v = diagnose(m, cuda_build());
  auto d = find(v, "nccl-no-interface");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(exit_code(v), 2);
}

TEST(DoctorVerdicts, NcclLibraryMissingOrOlderThanTheBuild) {
  MachineDescription m = healthy();
  m.nccl_runtime = {false, "", "", 0, "libnccl.so.2 not on the loader's path"};
  auto d = find(diagnose(m, cuda_build()), "nccl-missing");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kError);
  // Older than the build but with every function hvrun calls (an image's 2.28.3 under a build
  // against 2.28.9): said, not warned about, and the doctor's exit code stays 0.
  m.nccl_runtime = {true, "/opt/nccl/libnccl.so.2", "2.18.1", 21801, ""};
  auto verdicts = diagnose(m, cuda_build());
  d = find(verdicts, "nccl-older-than-build");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kInfo);
  EXPECT_NE(d->reason.find("2.18.1"), std::string::npos);
  EXPECT_FALSE(find(verdicts, "nccl-missing-functions"));
  EXPECT_EQ(exit_code(verdicts), 0);
  // Lacking a function the GPU data plane calls: it cannot load, whatever the version says.
  m.nccl_runtime = {true, "/opt/nccl/libnccl.so.2", "2.12.12", 21212, "", {"ncclCommInitRankConfig"}};
  verdicts = diagnose(m, cuda_build());
  d = find(verdicts, "nccl-missing-functions");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_NE(d->reason.find("ncclCommInitRankConfig"), std::string::npos) << d->reason;
  EXPECT_NE(d->fix.find("LD_LIBRARY_PATH"), std::string::npos) << d->fix;
  EXPECT_FALSE(find(verdicts, "nccl-older-than-build"));
  EXPECT_EQ(exit_code(verdicts), 2);
  // A CPU build needs no NCCL.
  m.nccl_runtime = {};
  EXPECT_FALSE(find(diagnose(m, cpu_build()), "nccl-missing"));
}

TEST(DoctorVerdicts, BusyGpuIsAWarning) {
  MachineDescription m = healthy();
  m.gpus[0].memory_free = int64_t{10} << 30;
  m.gpus[0].utilization_gpu = 97;
  auto d = find(diagnose(m, cuda_build()), "gpu-busy");
  ASSERT_TRUE(d);
  EXPECT_NE(d->reason.find("71680 MiB of 81920 MiB in use, 97 % busy"), std::string::npos) << d->reason;
}

TEST(DoctorVerdicts, EnvironmentOverridingAConfigFileIsNoted) {
  MachineDescription m = healthy();
  m.environment["NCCL_DEBUG"] = "INFO";
  m.config_files[1].exists = true;
  m.config_files[1].entries = {{"NCCL_DEBUG", "WARN"}};
  auto d = find(diagnose(m, cuda_build()), "nccl-conf-overridden");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->severity, Severity::kInfo);
  EXPECT_NE(d->reason.find("/etc/nccl.conf: NCCL_DEBUG=WARN"), std::string::npos);
}

TEST(DoctorVerdicts, ErrorsComeFirstAndDecideTheExitCode) {
  MachineDescription m = healthy(2, "NVIDIA GeForce RTX 4090");
  m.driver.version = "470.82.01";
  m.driver.cuda_driver_version = 11040;
  auto v = diagnose(m, cuda_build());
  ASSERT_GE(v.size(), 2u);
  EXPECT_EQ(v.front().severity, Severity::kError);
  EXPECT_EQ(exit_code(v), 2);
  EXPECT_EQ(exit_code({}), 0);
}

TEST(DoctorVersions, CompareNumerically) {
  EXPECT_TRUE(version_less(parse_version("525.60.13"), parse_version("580")));
  EXPECT_FALSE(version_less(parse_version("580.65.06"), parse_version("580")));
  EXPECT_TRUE(version_less(parse_version("9.1"), parse_version("10.0")));  // not as strings
  EXPECT_TRUE(parse_version("abc").empty());
  EXPECT_EQ(minor_compat_driver_floor(11), "450.80.02");
  EXPECT_EQ(full_feature_driver(12, 8), "570.26");
  EXPECT_EQ(full_feature_driver(12, 5), "");
  EXPECT_TRUE(is_geforce("NVIDIA TITAN RTX"));
  EXPECT_FALSE(is_geforce("NVIDIA RTX A6000"));
}

}  // namespace
}  // namespace hvrun::doctor
