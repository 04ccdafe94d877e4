// The real `hvrun doctor` over stand-in driver libraries (fake_driver/: libcuda.so.1 and
// libnccl.so.2 with two host-memory "GPUs", found through LD_LIBRARY_PATH): the libcuda probe
// path and the whole --p2p-test machinery (two child processes with NCCL_P2P_DISABLE=0/1, the
// timeout that kills a hung child's process group, result parsing, verdicts) run without a GPU.
// What real NCCL does on real GPUs is for scripts/gpu-check.
#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

RunResult doctor(const std::vector<std::string>& args, const std::string& mode = "",
                 const std::string& gpu_name = "") {
  std::vector<std::string> argv = {bin_path("hvrun"), "doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.env["LD_LIBRARY_PATH"] = bin_path("doctor_fake_driver");
  o.env["FAKE_NCCL_MODE"] = mode;
  if (!gpu_name.empty()) o.env["FAKE_GPU_NAME"] = gpu_name;
  o.env["NCCL_P2P_DISABLE"] = std::nullopt;
  o.timeout = std::chrono::seconds(60);
  return run_process(argv, o);
}

// Processes whose command line holds `word` (none may survive a doctor run).
int processes_with(const std::string& word) {
  int found = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::stringstream s;
    s << in.rdbuf();
    std::string cmd = s.str();
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(word) != std::string::npos && cmd.find("hvrun") != std::string::npos) ++found;
  }
  closedir(proc);
  return found;
}

TEST(DoctorFakeDriver, LibcudaAloneListsTheGpusAndNccl) {
  RunResult r = doctor({});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.out.find("NVIDIA driver   version unknown (libnvidia-ml.so.1 not found) (CUDA 13.0 and older)"),
            std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("Fake GPU"), std::string::npos);
  EXPECT_NE(r.out.find("0000:11:00.0"), std::string::npos);
  EXPECT_NE(r.out.find("doctor_fake_driver/libnccl.so.2"), std::string::npos);
  EXPECT_NE(r.out.find("yes/?"), std::string::npos) << r.out;  // peer access, no NVML
  EXPECT_EQ(r.out.find("no NVIDIA driver"), std::string::npos);
}

TEST(DoctorFakeDriver, P2pTestMeasuresBothWays) {
  RunResult r = doctor({"--p2p-test"});
  ASSERT_FALSE(r.timed_out);
  EXPECT_NE(r.out.find("P2P on  (NCCL_P2P_DISABLE=0): "), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("of 64 MiB over 2 GPUs, busbw"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[info] P2P works"), std::string::npos) << r.out;
  EXPECT_EQ(processes_with("--p2p-child"), 0);
}

TEST(DoctorFakeDriver, AHungP2pAllreduceIsKilledAndReported) {
  auto start = std::chrono::steady_clock::now();
  RunResult r = doctor({"--p2p-test", "--p2p-timeout", "3"}, "hang-p2p");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("[error] NCCL allreduce fails with P2P and works without"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no result after 3 s (killed): the allreduce hangs"), std::string::npos);
  EXPECT_NE(r.out.find("fix: export NCCL_P2P_DISABLE=1"), std::string::npos);
  EXPECT_LT(took, std::chrono::seconds(20));
  EXPECT_EQ(processes_with("--p2p-child"), 0);  // the hung child's group was killed
}

TEST(DoctorFakeDriver, SlowOrWrongP2p) {
  RunResult slow = doctor({"--p2p-test"}, "slow-p2p");
  EXPECT_NE(slow.out.find("[warning] P2P is slower than going through host memory"), std::string::npos)
      << slow.out;
  RunResult wrong = doctor({"--p2p-test"}, "wrong-p2p");
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.out.find("wrong values with P2P on"), std::string::npos) << wrong.out;
}

TEST(DoctorFakeDriver, GeForceBoardsGetTheP2pWarning) {
  RunResult r = doctor({"--json"}, "", "NVIDIA GeForce RTX 3090");
  EXPECT_NE(r.out.find("\"id\":\"geforce-p2p\""), std::string::npos) << r.out;
  EXPECT_GE(r.exit_code, 1);
}

}  // namespace
}  // namespace hvrun::test
