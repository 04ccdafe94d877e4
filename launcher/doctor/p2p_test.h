// The conclusive P2P check (docs/gpu-facts.md: the driver, NVML and nvidia-smi can all say
// OK while NCCL hangs): a short timed NCCL allreduce across this host's GPUs, once with P2P
// allowed (NCCL_P2P_DISABLE=0) and once with NCCL_P2P_DISABLE=1. NCCL reads its variables once
// per process, so each run is a child process (`hvrun doctor --p2p-child`), killed with its
// process group when it outlives the timeout: a hang is a result, not a hung doctor.
// libcuda and libnccl.so.2 are dlopen()ed, so this works in every build where they exist.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/machine.h"
#include "launcher/doctor/report.h"
#include "launcher/doctor/verdicts.h"

namespace hvrun::doctor {

struct P2pMeasurement {
  bool ok = false;
  bool timed_out = false;
  double seconds_per_iteration = 0;
  double busbw_gbs = 0;  // nccl-tests' allreduce bus bandwidth: bytes * 2(n-1)/n / time
  long wrong = 0;        // elements that differ from the expected sum after one allreduce
  int gpus = 0;          // GPUs the child used
  std::string error;
};

// Combines the two runs into the report's result (pure; tests call it).
P2pTestResult p2p_result(int gpus, size_t bytes, const P2pMeasurement& on, const P2pMeasurement& off);

// Verdicts from a result: hangs or wrong sums with P2P on are errors; P2P slower than without
// is a warning; both recommend NCCL_P2P_DISABLE=1.
std::vector<Verdict> p2p_verdicts(const P2pTestResult& result);

// Runs both children (this host's GPUs). Says plainly why it cannot run: no driver, fewer than
// two GPUs, no libnccl.so.2.
P2pTestResult run_p2p_test(const MachineDescription& m, double timeout_seconds);

// The child's body: `--p2p-child BYTES ITERATIONS`; prints one "p2p-result ..." line.
int run_p2p_child(const std::vector<std::string>& args);

// Parses the child's "p2p-result ok=1 seconds=... busbw=... wrong=..." / "p2p-result ok=0
// error=..." line.
P2pMeasurement parse_child_output(const std::string& output);

}  // namespace hvrun::doctor
