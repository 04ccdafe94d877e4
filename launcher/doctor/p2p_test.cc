#include "launcher/doctor/p2p_test.h"

#include <cstdio>
#include <sstream>

#include "launcher/doctor/child_process.h"

namespace hvrun::doctor {
namespace {

constexpr size_t kDefaultBytes = 64u << 20;
constexpr int kDefaultIterations = 20;

std::string fmt_gbs(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB/s", v);
  return buf;
}

// Runs `hvrun doctor --p2p-child` with NCCL_P2P_DISABLE=value; a child that outlives the
// timeout is killed with its group and counts as a hang.
P2pMeasurement run_child(const std::string& p2p_disable, size_t bytes, double timeout_seconds) {
  ChildResult child = run_child_process(
      {self_executable(), "doctor", "--p2p-child", std::to_string(bytes),
       std::to_string(kDefaultIterations)},
      {{"NCCL_P2P_DISABLE", p2p_disable}}, timeout_seconds);
  if (child.timed_out) {
    P2pMeasurement m;
    m.timed_out = true;
    m.error = "no result after " + std::to_string(static_cast<int>(timeout_seconds)) +
              " s (killed): the allreduce hangs";
    return m;
  }
  P2pMeasurement parsed = parse_child_output(child.output);
  if (!parsed.ok && parsed.error.empty())
    parsed.error = "the test process ended without a result (exit " +
                   std::to_string(child.exit_code) + "): " + child.output.substr(0, 300);
  return parsed;
}

}  // namespace

P2pMeasurement parse_child_output(const std::string& output) {
  P2pMeasurement m;
  size_t at = output.rfind("p2p-result ");
  if (at == std::string::npos) return m;
  std::string line = output.substr(at + 11);
  line = line.substr(0, line.find('\n'));
  if (line.rfind("ok=0 error=", 0) == 0) {
    m.error = line.substr(11);
    return m;
  }
  std::istringstream in(line);
  std::string field;
  while (in >> field) {
    auto eq = field.find('=');
    if (eq == std::string::npos) continue;
    std::string k = field.substr(0, eq), v = field.substr(eq + 1);
    if (k == "ok") m.ok = v == "1";
    else if (k == "seconds") m.seconds_per_iteration = std::stod(v);
    else if (k == "busbw") m.busbw_gbs = std::stod(v);
    else if (k == "wrong") m.wrong = std::stol(v);
    else if (k == "gpus") m.gpus = std::stoi(v);
  }
  return m;
}

P2pTestResult p2p_result(int gpus, size_t bytes, const P2pMeasurement& on, const P2pMeasurement& off) {
  P2pTestResult r;
  r.ran = true;
  if (on.gpus > 0) gpus = on.gpus;
  auto line = [&](const char* label, const P2pMeasurement& m) {
    if (!m.ok) return std::string(label) + ": FAILED: " + m.error;
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s: %.3f ms per allreduce of %zu MiB over %d GPUs, busbw %s%s",
                  label, m.seconds_per_iteration * 1e3, bytes >> 20, gpus, fmt_gbs(m.busbw_gbs).c_str(),
                  m.wrong > 0 ? (", " + std::to_string(m.wrong) + " wrong values").c_str() : "");
    return std::string(buf);
  };
  r.lines.push_back(line("P2P on  (NCCL_P2P_DISABLE=0)", on));
  r.lines.push_back(line("P2P off (NCCL_P2P_DISABLE=1)", off));
  if (on.ok) r.busbw_p2p_gbs = on.busbw_gbs;
  else r.error_p2p = on.error.empty() ? "failed" : on.error;
  if (off.ok) r.busbw_no_p2p_gbs = off.busbw_gbs;
  else r.error_no_p2p = off.error.empty() ? "failed" : off.error;
  if (on.ok && on.wrong > 0) r.error_p2p = std::to_string(on.wrong) + " wrong values with P2P on";
  if (off.ok && off.wrong > 0) r.error_no_p2p = std::to_string(off.wrong) + " wrong values with P2P off";
  return r;
}

std::vector<Verdict> p2p_verdicts(const P2pTestResult& r) {
  const std::string fix = "export NCCL_P2P_DISABLE=1 (or hvrun --nccl-p2p off)";
  if (!r.ran)
    return {{Severity::kInfo, "p2p-test-not-run", "P2P test cannot run here", r.why_not, ""}};
  const bool on_ok = r.error_p2p.empty(), off_ok = r.error_no_p2p.empty();
  if (!on_ok && off_ok)
    return {{Severity::kError, "p2p-test-broken", "NCCL allreduce fails with P2P and works without",
             "P2P on: " + r.error_p2p + "; P2P off: " + fmt_gbs(r.busbw_no_p2p_gbs), fix}};
  if (!on_ok && !off_ok)
    return {{Severity::kError, "p2p-test-nccl-fails", "NCCL allreduce fails with and without P2P",
             "P2P on: " + r.error_p2p + "; P2P off: " + r.error_no_p2p,
             "run with NCCL_DEBUG=INFO to see why NCCL fails; check the driver and libnccl above"}};
  if (!off_ok)
    return {{Severity::kWarning, "p2p-test-fallback-fails", "NCCL works only with P2P",
             "P2P off: " + r.error_no_p2p + " (the shared-memory path NCCL falls back to)", ""}};
  if (r.busbw_p2p_gbs < 0.8 * r.busbw_no_p2p_gbs)
    return {{Severity::kWarning, "p2p-test-slow", "P2P is slower than going through host memory",
             "busbw " + fmt_gbs(r.busbw_p2p_gbs) + " with P2P, " + fmt_gbs(r.busbw_no_p2p_gbs) +
                 " without: the P2P path is broken or redirected (ACS, IOMMU, VM)",
             fix}};
  return {{Severity::kInfo, "p2p-test-ok", "P2P works",
           "busbw " + fmt_gbs(r.busbw_p2p_gbs) + " with P2P, " + fmt_gbs(r.busbw_no_p2p_gbs) +
               " without", ""}};
}

P2pTestResult run_p2p_test(const MachineDescription& m, double timeout_seconds) {
  P2pTestResult r;
  if (!m.driver.present) {
    r.why_not = "no NVIDIA driver on this machine (" + m.driver.why_absent + ")";
    return r;
  }
  if (m.gpus.size() < 2) {
    r.why_not = "it needs at least 2 GPUs on this host; found " + std::to_string(m.gpus.size());
    return r;
  }
  if (!m.nccl_runtime.found) {
    r.why_not = "libnccl.so.2 not found (" + m.nccl_runtime.note + ")";
    return r;
  }
  P2pMeasurement on = run_child("0", kDefaultBytes, timeout_seconds);
  P2pMeasurement off = run_child("1", kDefaultBytes, timeout_seconds);
  return p2p_result(static_cast<int>(m.gpus.size()), kDefaultBytes, on, off);
}

}  // namespace hvrun::doctor
