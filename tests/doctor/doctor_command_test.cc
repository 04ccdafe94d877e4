// The doctor command end to end over scripted machines: report, --json, exit codes, -H, the P2P
// test's verdicts.
#include "launcher/doctor/doctor_command.h"

#include <gtest/gtest.h>

#include <sstream>

#include "launcher/doctor/framework_probe.h"
#include "launcher/doctor/p2p_test.h"
#include "tests/doctor/machines.h"

namespace hvrun::doctor {
namespace {

struct DoctorRun {
  int code;
  std::string out, err;
};

DoctorRun run(const std::vector<std::string>& args, MachineDescription m, BuildFacts b = test::cuda_build(),
        std::function<P2pTestResult(const MachineDescription&, const DoctorOptions&)> p2p = nullptr) {
  ScriptedProbe probe(std::move(m));
  DoctorDeps deps;
  deps.probe = &probe;
  deps.build = b;
  deps.p2p_test = p2p ? p2p : [](const MachineDescription& md, const DoctorOptions& o) {
    return run_p2p_test(md, o.p2p_timeout_seconds);
  };
  std::ostringstream out, err;
  int code = run_doctor(args, deps, out, err);
  return {code, out.str(), err.str()};
}

TEST(DoctorCommand, ReportShowsGpusMatricesInterfacesAndSettings) {
  MachineDescription m = test::healthy(2);
  m.environment["NCCL_DEBUG"] = "INFO";
  DoctorRun r = run({}, m);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("580.65.06 (CUDA 13.0 and older)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVIDIA H100 80GB HBM3"), std::string::npos);
  EXPECT_NE(r.out.find("00000000:10:00.0"), std::string::npos);
  EXPECT_NE(r.out.find("yes/OK"), std::string::npos);  // P2P matrix
  EXPECT_NE(r.out.find("NV4"), std::string::npos);     // topology matrix
  EXPECT_NE(r.out.find("NCCL would use: eth0"), std::string::npos);
  EXPECT_NE(r.out.find("NCCL_DEBUG=INFO   (environment)"), std::string::npos);
  EXPECT_NE(r.out.find("0 error(s), 0 warning(s)"), std::string::npos);
}

TEST(DoctorCommand, JsonCarriesTheSameFactsAndVerdicts) {
  MachineDescription m = test::healthy(2, "NVIDIA GeForce RTX 4090");
  DoctorRun r = run({"--json"}, m);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_NE(r.out.find("\"name\":\"NVIDIA GeForce RTX 4090\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"compute_capability\":\"9.0\""), std::string::npos);
  EXPECT_NE(r.out.find("\"id\":\"geforce-p2p\""), std::string::npos);
  EXPECT_NE(r.out.find("\"nccl_interfaces\":{\"names\":[\"eth0\"]"), std::string::npos);
  EXPECT_NE(r.out.find("\"exit_code\":1}"), std::string::npos);
}

TEST(DoctorCommand, HostsWithoutAMultiHostRunnerSaySo) {
  DoctorRun r = run({"-H", "a,b"}, test::healthy());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not available in this hvrun"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(DoctorCommand, BadOptionsExit2) {
  DoctorRun r = run({"--frobnicate"}, test::healthy());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown option '--frobnicate'"), std::string::npos);
  EXPECT_EQ(run({"--p2p-timeout", "0"}, test::healthy()).code, 2);
  EXPECT_EQ(run({"--help"}, test::healthy()).code, 0);
}

TEST(DoctorCommand, P2pTestSaysPlainlyWhyItCannotRun) {
  MachineDescription none;
  none.driver.why_absent = "libnvidia-ml.so.1 not found";
  DoctorRun r = run({"--p2p-test"}, none, test::cpu_build());
  EXPECT_NE(r.out.find("cannot run: no NVIDIA driver"), std::string::npos) << r.out;
  r = run({"--p2p-test"}, test::healthy(1));
  EXPECT_NE(r.out.find("cannot run: it needs at least 2 GPUs"), std::string::npos) << r.out;
  EXPECT_EQ(r.code, 0);  // an info, not a failure
}

TEST(DoctorCommand, P2pTestResultsBecomeVerdicts) {
  auto hang = [](const MachineDescription&, const DoctorOptions&) {
    P2pMeasurement on, off;
    on.timed_out = true;
    on.error = "no result after 60 s (killed): the allreduce hangs";
    off.ok = true;
    off.busbw_gbs = 9.5;
    off.seconds_per_iteration = 0.01;
    off.gpus = 2;
    return p2p_result(2, 64u << 20, on, off);
  };
  DoctorRun r = run({"--p2p-test"}, test::healthy(2, "NVIDIA GeForce RTX 3090"), test::cuda_build(), hang);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("[error] NCCL allreduce fails with P2P and works without"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("P2P on  (NCCL_P2P_DISABLE=0): FAILED: no result after 60 s"), std::string::npos);
  EXPECT_NE(r.out.find("9.50 GB/s"), std::string::npos);
}

TEST(DoctorFrameworks, ProbeLinesAreParsed) {
  auto f = parse_framework_lines(
      "Warning: noise\nframework PyTorch 2.11.0+cu128 cuda=12.8 cudnn=91002 nccl=2.28.9\n"
      "framework PyTorch 1.13.0a0 cuda=None cudnn= nccl=\nframework TensorFlow 2.15.0 cuda=12.2 cudnn=8 nccl=\n");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].version, "2.11.0+cu128");
  EXPECT_EQ(f[0].nccl, "2.28.9");
  EXPECT_EQ(f[1].cuda, "");
  EXPECT_EQ(f[2].name, "TensorFlow");
  EXPECT_EQ(f[2].cuda, "12.2");
}

TEST(DoctorFrameworks, ReportListsThem) {
  MachineDescription m = test::healthy();
  m.frameworks = {{"PyTorch", "2.11.0", "12.8", "91002", "2.28.9"}};
  m.frameworks_note = "asked /usr/bin/python3";
  DoctorRun r = run({"--frameworks"}, m);
  EXPECT_NE(r.out.find("Frameworks (asked /usr/bin/python3)\n  PyTorch 2.11.0, CUDA 12.8, cuDNN 91002, NCCL 2.28.9"),
            std::string::npos) << r.out;
  EXPECT_NE(run({"--json"}, m).out.find("\"frameworks\":[{\"name\":\"PyTorch\""), std::string::npos);
}

TEST(P2pTest, VerdictsCompareTheTwoRuns) {
  P2pMeasurement fast, slow;
  fast.ok = slow.ok = true;
  fast.busbw_gbs = 20;
  slow.busbw_gbs = 3;
  EXPECT_EQ(p2p_verdicts(p2p_result(2, 1 << 20, slow, fast))[0].id, "p2p-test-slow");
  EXPECT_EQ(p2p_verdicts(p2p_result(2, 1 << 20, fast, slow))[0].id, "p2p-test-ok");
  P2pMeasurement wrong = fast;
  wrong.wrong = 12;
  auto v = p2p_verdicts(p2p_result(2, 1 << 20, wrong, slow));
  EXPECT_EQ(v[0].severity, Severity::kError);
  EXPECT_NE(v[0].reason.find("12 wrong values"), std::string::npos);
  P2pMeasurement broken;
  broken.error = "ncclCommInitAll: unhandled system error";
  EXPECT_EQ(p2p_verdicts(p2p_result(2, 1 << 20, broken, broken))[0].id, "p2p-test-nccl-fails");
  P2pTestResult not_run;
  not_run.why_not = "no GPU";
  EXPECT_EQ(p2p_verdicts(not_run)[0].severity, Severity::kInfo);
}

TEST(P2pTest, ChildOutputParsing) {
  auto m = parse_child_output("NCCL INFO noise\np2p-result ok=1 gpus=4 seconds=0.002500000 busbw=40.265 wrong=0\n");
  EXPECT_TRUE(m.ok);
  EXPECT_EQ(m.gpus, 4);
  EXPECT_DOUBLE_EQ(m.busbw_gbs, 40.265);
  EXPECT_DOUBLE_EQ(m.seconds_per_iteration, 0.0025);
  auto f = parse_child_output("p2p-result ok=0 error=libnccl.so.2 not found\n");
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.error, "libnccl.so.2 not found");
  EXPECT_FALSE(parse_child_output("Segmentation fault").ok);
}

}  // namespace
}  // namespace hvrun::doctor
