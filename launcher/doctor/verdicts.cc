#include "launcher/doctor/verdicts.h"

#include <algorithm>
#include <sstream>

#include "launcher/doctor/nccl_interfaces.h"
#include "launcher/doctor/nccl_settings.h"

namespace hvrun::doctor {
namespace {

struct CudaLevel {
  int major = 0;
  int minor = 0;
  std::string where;  // "libcudart.so.13 found at run time", "this build (CUDA 13.0)"
};

// The CUDA runtime jobs on this machine will use: the one the loader finds, else the build's.
std::optional<CudaLevel> cuda_in_use(const MachineDescription& m, const BuildFacts& b) {
  if (m.cuda_runtime.found && m.cuda_runtime.code > 0)
    return CudaLevel{m.cuda_runtime.code / 1000, (m.cuda_runtime.code % 1000) / 10,
                     "the CUDA runtime found at run time (" +
                         (m.cuda_runtime.path.empty() ? std::string("libcudart") : m.cuda_runtime.path) +
                         ", " + m.cuda_runtime.version + ")"};
  if (b.have_cuda) {
    auto v = parse_version(b.cuda_version);
    if (v.size() >= 2) return CudaLevel{v[0], v[1], "the CUDA " + b.cuda_version + " hvrun was built with"};
  }
  return std::nullopt;
}

void check_driver_against(const MachineDescription& m, const CudaLevel& level,
                          std::vector<Verdict>& out);

void check_driver(const MachineDescription& m, const BuildFacts& b, std::vector<Verdict>& out) {
  if (!m.driver.present) {
    out.push_back({Severity::kWarning, "no-driver", "no NVIDIA driver on this machine",
                   m.driver.why_absent.empty() ? "NVML and libcuda could not be loaded"
                                               : m.driver.why_absent,
                   "CPU jobs run (Gloo); for GPU jobs install the NVIDIA driver (>= 580 for "
                   "CUDA 13) or run on a GPU machine"});
    return;
  }
  std::vector<CudaLevel> levels;
  if (auto cuda = cuda_in_use(m, b)) levels.push_back(*cuda);
  // A framework brings its own CUDA runtime: the driver must serve that one too.
  for (const FrameworkInfo& f : m.frameworks) {
    auto v = parse_version(f.cuda);
    if (v.size() >= 2)
      levels.push_back({v[0], v[1], f.name + " " + f.version + " (built with CUDA " + f.cuda + ")"});
  }
  for (const CudaLevel& level : levels) check_driver_against(m, level, out);
}

void check_driver_against(const MachineDescription& m, const CudaLevel& level,
                          std::vector<Verdict>& out) {
  const CudaLevel* cuda = &level;
  const std::string cuda_text = std::to_string(cuda->major) + "." + std::to_string(cuda->minor);
  const std::string floor = minor_compat_driver_floor(cuda->major);
  auto driver = parse_version(m.driver.version);
  const int driver_cuda_major = m.driver.cuda_driver_version / 1000;
  const bool below_floor = (!floor.empty() && !driver.empty() &&
                            version_less(driver, parse_version(floor))) ||
                           (m.driver.cuda_driver_version > 0 && driver_cuda_major < cuda->major);
  if (below_floor) {
    std::string reason = m.driver.version.empty() ? "the driver" : "driver " + m.driver.version;
    if (m.driver.cuda_driver_version > 0)
      reason += " (runs CUDA up to " + std::to_string(driver_cuda_major) + "." +
                std::to_string((m.driver.cuda_driver_version % 1000) / 10) + ")";
    reason += " is below what " + cuda->where + " needs: CUDA " + std::to_string(cuda->major) +
              ".x needs driver >= " + (floor.empty() ? "a newer one" : floor) +
              " (CUDA release notes, minor-version compatibility)";
    out.push_back({Severity::kError, "driver-below-floor",
                   "NVIDIA driver too old for CUDA " + cuda_text, reason,
                   "upgrade the driver to >= " + (floor.empty() ? "the CUDA release notes' floor" : floor) +
                       ", or use a CUDA " + std::to_string(std::max(driver_cuda_major, 11)) +
                       ".x build of hvrun and your framework"});
    return;
  }
  const std::string full = full_feature_driver(cuda->major, cuda->minor);
  if (!full.empty() && !driver.empty() && version_less(driver, parse_version(full))) {
    out.push_back({Severity::kWarning, "driver-below-full-feature",
                   "driver runs CUDA " + cuda_text + " only through minor-version compatibility",
                   "driver " + m.driver.version + " < " + full + ", the full-feature driver of CUDA " +
                       cuda_text + ": kernels shipped only as newer PTX cannot be JIT-compiled and "
                       "some APIs return cudaErrorCallRequiresNewerDriver",
                   "upgrade the driver to >= " + full});
  }
}

void check_compute_capability(const MachineDescription& m, const BuildFacts& b,
                              std::vector<Verdict>& out) {
  int floor = b.have_cuda ? b.min_compute_capability : 0;
  std::string why = "the lowest architecture this build's kernels target";
  if (floor == 0) {
    auto cuda = cuda_in_use(m, b);
    if (cuda && cuda->major >= 13) {
      floor = 75;
      why = "CUDA 13 (" + cuda->where + ") compiles nothing below 7.5";
    }
  }
  if (floor == 0) return;
  for (const GpuInfo& g : m.gpus) {
    if (g.cc_major < 0) continue;
    int cc = g.cc_major * 10 + g.cc_minor;
    if (cc >= floor) continue;
    const std::string cc_text = std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
    // Above 7.5 the build chose to skip architectures CUDA 13 could still compile: rebuild.
    std::string fix = cc >= 75 ? "rebuild hvrun with -DHVRUN_CUDA_ARCHITECTURES=\"" +
                                     std::to_string(cc) + ";" + std::to_string(floor) + "\""
                               : "use a GPU of compute capability >= 7.5 (Turing or newer), or a "
                                 "CUDA 12 build of hvrun and your framework for this GPU";
    out.push_back({b.have_cuda ? Severity::kError : Severity::kWarning, "compute-capability-too-low",
                   "GPU " + std::to_string(g.index) + " (" + g.name + ") has compute capability " +
                       cc_text,
                   "below " + std::to_string(floor / 10) + "." + std::to_string(floor % 10) + ", " + why,
                   fix});
  }
}

bool p2p_disabled(const MachineDescription& m) {
  auto v = effective_value(m, "NCCL_P2P_DISABLE");
  if (v && *v == "1") return true;
  auto level = effective_value(m, "NCCL_P2P_LEVEL");
  return level && (*level == "LOC" || *level == "0");
}

std::string p2p_status_text(const MachineDescription& m) {
  auto v = effective_value(m, "NCCL_P2P_DISABLE");
  return v ? "NCCL_P2P_DISABLE=" + *v : "NCCL_P2P_DISABLE unset";
}

void check_p2p(const MachineDescription& m, std::vector<Verdict>& out) {
  if (m.gpus.size() < 2) return;
  const bool disabled = p2p_disabled(m);
  std::vector<std::string> geforce;
  std::string names;  // the distinct GeForce models, in order
  for (const GpuInfo& g : m.gpus) {
    if (!is_geforce(g.name)) continue;
    geforce.push_back(std::to_string(g.index));
    if (names.find(g.name) == std::string::npos) names += (names.empty() ? "" : ", ") + g.name;
  }
  if (!geforce.empty() && !disabled) {
    std::string list;
    for (const std::string& g : geforce) list += (list.empty() ? "" : ", ") + g;
    list += " (" + names + ")";
    out.push_back({Severity::kWarning, "geforce-p2p", "GeForce GPUs with NCCL P2P enabled",
                   "GPU " + list + ": GeForce cards do not support P2P (NVIDIA/nccl-tests#287) even "
                   "where the driver reports peer access; NCCL's P2P transport then hangs or crawls",
                   "export NCCL_P2P_DISABLE=1 (or hvrun --nccl-p2p off); hvrun doctor --p2p-test "
                   "measures both"});
  }
  // Pairs the driver calls P2P-capable over PCIe (NVLink paths do not cross ACS bridges).
  std::vector<std::string> pcie_ok;
  std::vector<std::string> disagree;
  std::vector<std::string> no_access;
  for (const GpuPair& p : m.pairs) {
    if (p.a >= p.b) continue;
    const std::string pair = std::to_string(p.a) + "-" + std::to_string(p.b);
    const bool driver_ok = p.cuda_peer_access.value_or(false) || p.nvml_p2p_read == "OK";
    if (driver_ok && p.nvlinks == 0) pcie_ok.push_back(pair);
    if (p.cuda_peer_access == true && !p.nvml_p2p_read.empty() && p.nvml_p2p_read != "OK")
      disagree.push_back(pair + " (NVML: " + p.nvml_p2p_read + ")");
    if (p.cuda_peer_access == false) no_access.push_back(pair);
  }
  std::vector<std::string> suspicions;
  if (m.pcie.acs_enabled == true)
    suspicions.push_back("PCIe ACS is on" +
                         (m.pcie.acs_where.empty() ? std::string() : " (bridge " + m.pcie.acs_where + ")"));
  if (m.pcie.iommu_enabled == true) suspicions.push_back("the IOMMU is on");
  if (m.pcie.virtual_machine == true)
    suspicions.push_back("this is a virtual machine" +
                         (m.pcie.hypervisor.empty() ? std::string() : " (" + m.pcie.hypervisor + ")"));
  if (!pcie_ok.empty() && !suspicions.empty() && !disabled && geforce.empty()) {
    std::string pairs, why;
    for (const std::string& p : pcie_ok) pairs += (pairs.empty() ? "" : ", ") + p;
    for (const std::string& s : suspicions) why += (why.empty() ? "" : "; ") + s;
    out.push_back({Severity::kWarning, "p2p-acs-suspect",
                   "P2P over PCIe may hang or crawl although the driver reports it OK",
                   "GPU pairs " + pairs + " use PCIe P2P and " + why +
                       ": peer traffic is then redirected through the root complex, or blocked",
                   "run hvrun doctor --p2p-test; if P2P is slower or hangs, export "
                   "NCCL_P2P_DISABLE=1 (or hvrun --nccl-p2p off), or disable ACS in the BIOS"});
  }
  if (!disagree.empty()) {
    std::string pairs;
    for (const std::string& p : disagree) pairs += (pairs.empty() ? "" : ", ") + p;
    out.push_back({Severity::kInfo, "p2p-nvml-disagrees",
                   "CUDA allows peer access but NVML reports P2P not OK",
                   "pairs " + pairs + ": NCCL follows NVML and uses shared memory for them", ""});
  }
  if (!no_access.empty()) {
    std::string pairs;
    for (const std::string& p : no_access) pairs += (pairs.empty() ? "" : ", ") + p;
    out.push_back({Severity::kInfo, "p2p-unavailable", "no peer access between some GPUs",
                   "pairs " + pairs + " (cuDeviceCanAccessPeer = 0): NCCL uses shared memory or "
                   "the network between them; hvrun --nccl-p2p auto sets NCCL_P2P_DISABLE=1 for "
                   "jobs that use such a pair",
                   ""});
  }
  if (disabled)
    out.push_back({Severity::kInfo, "p2p-disabled", "NCCL P2P is disabled", p2p_status_text(m) +
                   (effective_value(m, "NCCL_P2P_LEVEL") ? ", NCCL_P2P_LEVEL=" +
                                                               *effective_value(m, "NCCL_P2P_LEVEL")
                                                         : std::string()) +
                   ": GPUs exchange data through host memory (slower, but safe)", ""});
}

void check_interfaces(const MachineDescription& m, std::vector<Verdict>& out) {
  auto ifname = effective_value(m, "NCCL_SOCKET_IFNAME");
  NcclInterfacePick pick = nccl_socket_interfaces(m.interfaces, ifname,
                                                  effective_value(m, "NCCL_COMM_ID"),
                                                  effective_value(m, "NCCL_SOCKET_FAMILY"));
  if (pick.names.empty()) {
    out.push_back({pick.user_list ? Severity::kError : Severity::kWarning, "nccl-no-interface",
                   "NCCL would find no network interface",
                   pick.rule + (pick.user_list ? ": no interface with an address matches it" : ""),
                   pick.user_list ? "fix NCCL_SOCKET_IFNAME (names are prefixes; '=' for exact "
                                    "names); the interfaces are listed above"
                                  : "bring up a network interface with an address"});
    return;
  }
  std::vector<std::string> bad, bad_names;
  bool loopback = false;
  for (const std::string& name : pick.names) {
    for (const NetInterface& iface : m.interfaces) {
      if (iface.name != name) continue;
      if (std::string why = virtual_interface_reason(iface); !why.empty()) {
        bad.push_back(name + " (" + why + ")");
        // Only a plain Linux bridge can be a bridge over the host's own NIC (not docker's,
        // libvirt's or a container's).
        if (why == "Linux bridge") bad_names.push_back(name);
        loopback = loopback || why == "loopback";
      }
    }
  }
  if (bad.empty()) return;
  // The real NICs a user should name instead: fastest first.
  std::vector<const NetInterface*> real;
  for (const NetInterface& iface : m.interfaces)
    if (virtual_interface_reason(iface).empty() && iface.has_ipv4 && iface.operstate != "down")
      real.push_back(&iface);
  std::stable_sort(real.begin(), real.end(), [](const NetInterface* a, const NetInterface* b) {
    return a->speed_mbps > b->speed_mbps;
  });
  std::string bad_list, fix;
  for (const std::string& b : bad) bad_list += (bad_list.empty() ? "" : ", ") + b;
  if (!real.empty()) {
    std::string names;
    for (const NetInterface* r : real) names += (names.empty() ? "" : ",") + r->name;
    fix = "export NCCL_SOCKET_IFNAME==" + names + " (exact names; the same variable can differ per "
          "host)";
  } else if (bad_names.empty()) {
    fix = "this host has no other interface with an address: multi-host NCCL jobs cannot run "
          "from it (single-host jobs are fine)";
  } else {
    // A bridge may be the host's own network (a bridge over the physical NIC): then say so.
    std::string names;
    for (const std::string& n : bad_names) names += (names.empty() ? "" : ",") + n;
    fix = "no physical interface has an address; if " + names + " carries this host's own "
          "network (a bridge over its NIC), name it exactly: export NCCL_SOCKET_IFNAME==" + names;
  }
  // Chosen on purpose through NCCL_SOCKET_IFNAME: only loopback still deserves a warning.
  const Severity severity = pick.user_list && !loopback ? Severity::kInfo : Severity::kWarning;
  out.push_back({severity, "nccl-interface-virtual",
                 "NCCL would use " + bad_list,
                 pick.rule + "; NCCL tests neither reachability nor speed, so a multi-host job "
                 "over it hangs at bootstrap or runs slowly",
                 fix});
}

void check_nccl_library(const MachineDescription& m, const BuildFacts& b, std::vector<Verdict>& out) {
  if (b.nccl_version_code > 0 && !m.nccl_runtime.found) {
    out.push_back({Severity::kError, "nccl-missing",
                   "hvrun was built with NCCL " + b.nccl_version + " but libnccl.so.2 is not found",
                   m.nccl_runtime.note, "install NCCL or add its lib directory to LD_LIBRARY_PATH"});
    return;
  }
  if (b.nccl_version_code == 0 || !m.nccl_runtime.found) return;
  const std::string found = m.nccl_runtime.version + " (" + m.nccl_runtime.path + ")";
  if (!m.nccl_runtime.missing.empty()) {
    std::string functions;
    for (const std::string& f : m.nccl_runtime.missing) functions += (functions.empty() ? "" : ", ") + f;
    out.push_back({Severity::kError, "nccl-missing-functions",
                   "libnccl.so.2 found at run time lacks NCCL functions hvrun calls",
                   "found " + found + " without " + functions + ": hvrun's GPU data plane "
                   "(libhvrun_cuda.so) cannot load with it, so every CUDA tensor's collective fails",
                   "put NCCL >= " + b.nccl_version + " first on the library path (LD_LIBRARY_PATH; "
                   "PyTorch's nvidia/nccl/lib has one)"});
    return;
  }
  // An older NCCL with every function hvrun calls works: said, not warned about.
  if (m.nccl_runtime.code > 0 && m.nccl_runtime.code < b.nccl_version_code)
    out.push_back({Severity::kInfo, "nccl-older-than-build",
                   "libnccl.so.2 found at run time is older than the NCCL hvrun was built with",
                   "found " + found + ", built with " + b.nccl_version +
                       "; it has every NCCL function hvrun calls",
                   ""});
}

void check_busy(const MachineDescription& m, std::vector<Verdict>& out) {
  for (const GpuInfo& g : m.gpus) {
    const bool mem_busy = g.memory_total > 0 && g.memory_free >= 0 &&
                          g.memory_free < g.memory_total / 2;
    const bool util_busy = g.utilization_gpu >= 50;
    if (!mem_busy && !util_busy) continue;
    std::ostringstream why;
    if (mem_busy)
      why << (g.memory_total - g.memory_free) / (1 << 20) << " MiB of "
          << g.memory_total / (1 << 20) << " MiB in use";
    if (util_busy) why << (mem_busy ? ", " : "") << g.utilization_gpu << " % busy";
    out.push_back({Severity::kWarning, "gpu-busy",
                   "GPU " + std::to_string(g.index) + " is in use by another process",
                   why.str() + ": a job there competes for memory and time",
                   "check nvidia-smi for the process, or pick other GPUs with CUDA_VISIBLE_DEVICES"});
  }
}

void check_config_overrides(const MachineDescription& m, std::vector<Verdict>& out) {
  for (const auto& [name, setting] : effective_nccl_settings(m)) {
    for (const std::string& lost : setting.overridden)
      out.push_back({Severity::kInfo, "nccl-conf-overridden",
                     name + " comes from " + setting.source + " (" + setting.value + ")",
                     "it overrides " + lost + " (NCCL reads the environment first, then "
                     "NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf)", ""});
  }
}

}  // namespace

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "?";
}

std::vector<int> parse_version(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, '.')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return {};
    out.push_back(std::stoi(part));
  }
  return out;
}

bool version_less(const std::vector<int>& a, const std::vector<int>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    int x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    if (x != y) return x < y;
  }
  return false;
}

std::string minor_compat_driver_floor(int cuda_major) {
  switch (cuda_major) {
    case 13: return "580";
    case 12: return "525.60.13";
    case 11: return "450.80.02";
    default: return "";
  }
}

std::string full_feature_driver(int major, int minor) {
  struct Row { int major, minor; const char* driver; };
  static const Row rows[] = {{13, 0, "580.65.06"}, {12, 8, "570.26"},   {12, 6, "560.28.03"},
                             {12, 4, "550.54.14"}, {12, 2, "535.54.03"}, {12, 0, "525.60.13"},
                             {11, 8, "520.61.05"}, {11, 7, "515.43.04"}, {11, 2, "460.27.03"}};
  for (const Row& r : rows)
    if (r.major == major && r.minor == minor) return r.driver;
  return "";
}

bool is_geforce(const std::string& name) {
  return name.find("GeForce") != std::string::npos || name.find("TITAN") != std::string::npos;
}

std::vector<Verdict> diagnose(const MachineDescription& m, const BuildFacts& b) {
  std::vector<Verdict> out;
  check_driver(m, b, out);
  check_nccl_library(m, b, out);
  check_compute_capability(m, b, out);
  check_busy(m, out);
  check_p2p(m, out);
  check_interfaces(m, out);
  check_config_overrides(m, out);
  std::stable_sort(out.begin(), out.end(), [](const Verdict& a, const Verdict& x) {
    return static_cast<int>(a.severity) > static_cast<int>(x.severity);
  });
  return out;
}

int exit_code(const std::vector<Verdict>& verdicts) {
  int code = 0;
  for (const Verdict& v : verdicts) code = std::max(code, static_cast<int>(v.severity));
  return code;
}

}  // namespace hvrun::doctor
