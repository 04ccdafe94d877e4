#include "launcher/doctor/report.h"

#include <cstdio>
#include <sstream>

#include "launcher/doctor/json_writer.h"
#include "launcher/doctor/nccl_interfaces.h"
#include "launcher/doctor/nccl_settings.h"

namespace hvrun::doctor {
namespace {

std::string mib(int64_t bytes) { return bytes < 0 ? "?" : std::to_string(bytes / (1 << 20)) + " MiB"; }

std::string library_text(const LibraryFound& lib) {
  if (!lib.found) return "not found" + (lib.note.empty() ? std::string() : " (" + lib.note + ")");
  std::string text = lib.version.empty() ? "found" : lib.version;
  if (!lib.path.empty()) text += " (" + lib.path + ")";
  if (!lib.note.empty()) text += "; " + lib.note;
  if (!lib.missing.empty()) {
    text += "; lacks";
    for (const std::string& f : lib.missing) text += " " + f;
  }
  return text;
}

const GpuPair* find_pair(const MachineDescription& m, int a, int b) {
  for (const GpuPair& p : m.pairs)
    if (p.a == a && p.b == b) return &p;
  return nullptr;
}

std::string opt_bool(const std::optional<bool>& v) { return !v ? "unknown" : *v ? "yes" : "no"; }
std::string on_off(const std::optional<bool>& v) { return !v ? "unknown" : *v ? "on" : "off"; }

NcclInterfacePick pick_for(const MachineDescription& m) {
  return nccl_socket_interfaces(m.interfaces, effective_value(m, "NCCL_SOCKET_IFNAME"),
                                effective_value(m, "NCCL_COMM_ID"),
                                effective_value(m, "NCCL_SOCKET_FAMILY"));
}

void write_matrix(std::ostringstream& out, const MachineDescription& m,
                  std::string (*cell)(const GpuPair*)) {
  char buf[64];
  out << "        ";
  for (const GpuInfo& g : m.gpus) {
    std::snprintf(buf, sizeof buf, "%-10s", ("GPU" + std::to_string(g.index)).c_str());
    out << buf;
  }
  out << "\n";
  for (const GpuInfo& a : m.gpus) {
    std::snprintf(buf, sizeof buf, "  %-6s", ("GPU" + std::to_string(a.index)).c_str());
    out << buf;
    for (const GpuInfo& b : m.gpus) {
      std::string text = a.index == b.index ? "X" : cell(find_pair(m, a.index, b.index));
      std::snprintf(buf, sizeof buf, "%-10s", text.c_str());
      out << buf;
    }
    out << "\n";
  }
}

std::string p2p_cell(const GpuPair* p) {
  if (p == nullptr) return "?";
  std::string cuda = !p->cuda_peer_access ? "?" : *p->cuda_peer_access ? "yes" : "no";
  std::string nvml = p->nvml_p2p_read.empty() ? "?" : p->nvml_p2p_read == "OK" ? "OK" : "no";
  return cuda + "/" + nvml;
}

std::string topo_cell(const GpuPair* p) {
  if (p == nullptr) return "?";
  if (p->nvlinks > 0) return "NV" + std::to_string(p->nvlinks);
  return topology_name(p->common_ancestor);
}

}  // namespace

std::string topology_name(int level) {
  switch (level) {
    case 0: return "INT";
    case 10: return "PIX";
    case 20: return "PXB";
    case 30: return "PHB";
    case 40: return "NODE";
    case 50: return "SYS";
    default: return "?";
  }
}

std::string render_text(const MachineDescription& m, const BuildFacts& b,
                        const std::vector<Verdict>& verdicts, const P2pTestResult* p2p) {
  std::ostringstream out;
  char buf[512];
  out << "hvrun doctor on " << (m.host.empty() ? "this host" : m.host) << "\n\n";
  out << "Driver and libraries\n";
  if (m.driver.present) {
    // Without NVML only libcuda answered: it knows the CUDA level, not the version number.
    out << "  NVIDIA driver   "
        << (m.driver.version.empty()
                ? "version unknown" + (m.driver.why_absent.empty() ? std::string()
                                                                   : " (" + m.driver.why_absent + ")")
                : m.driver.version);
    if (m.driver.cuda_driver_version > 0)
      out << " (CUDA " << m.driver.cuda_driver_version / 1000 << "."
          << (m.driver.cuda_driver_version % 1000) / 10 << " and older)";
    out << "\n";
  } else {
    out << "  NVIDIA driver   none: " << m.driver.why_absent << "\n";
  }
  out << "  CUDA runtime    built with " << (b.have_cuda ? b.cuda_version : "none (CPU-only build)")
      << "; at run time " << library_text(m.cuda_runtime) << "\n";
  out << "  NCCL            built with " << (b.nccl_version_code > 0 ? b.nccl_version : "none")
      << "; at run time " << library_text(m.nccl_runtime) << "\n";
  if (b.min_compute_capability > 0)
    out << "  kernels for     compute capability " << b.min_compute_capability / 10 << "."
        << b.min_compute_capability % 10 << " and newer\n";

  out << "\nGPUs\n";
  if (m.gpus.empty()) {
    out << "  none" << (m.driver.present ? "" : " (no driver)") << "\n";
  } else {
    std::snprintf(buf, sizeof buf, "  %-4s %-26s %-17s %-20s %-8s %-5s %-5s %s\n", "#", "name",
                  "PCI bus id", "memory free/total", "cc", "NUMA", "util", "UUID");
    out << buf;
    for (const GpuInfo& g : m.gpus) {
      std::string cc = g.cc_major < 0 ? "?" : std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor);
      std::string util = g.utilization_gpu < 0 ? "?" : std::to_string(g.utilization_gpu) + "%";
      std::string numa = g.numa_node < 0 ? "-" : std::to_string(g.numa_node);
      std::string mem = mib(g.memory_free) + "/" + mib(g.memory_total);
      std::snprintf(buf, sizeof buf, "  %-4d %-26s %-17s %-20s %-8s %-5s %-5s %s\n", g.index,
                    g.name.c_str(), g.pci_bus_id.c_str(), mem.c_str(), cc.c_str(), numa.c_str(),
                    util.c_str(), g.uuid.c_str());
      out << buf;
    }
  }
  if (m.gpus.size() >= 2) {
    out << "\nP2P (CUDA peer access / NVML P2P read status)\n";
    write_matrix(out, m, p2p_cell);
    out << "\nTopology (NVLink links NV#, else NVML common ancestor: PIX one switch, PXB several, "
           "PHB host bridge, NODE same NUMA node, SYS across sockets)\n";
    write_matrix(out, m, topo_cell);
  }
  out << "\nPCIe: ACS " << on_off(m.pcie.acs_enabled)
      << (m.pcie.acs_where.empty() ? "" : " (" + m.pcie.acs_where + ")") << ", IOMMU "
      << on_off(m.pcie.iommu_enabled) << ", virtual machine " << opt_bool(m.pcie.virtual_machine)
      << (m.pcie.hypervisor.empty() ? "" : " (" + m.pcie.hypervisor + ")") << "\n";

  NcclInterfacePick pick = pick_for(m);
  out << "\nNetwork interfaces\n";
  std::snprintf(buf, sizeof buf, "  %-12s %-8s %-10s %-6s %-5s %-30s %s\n", "name", "state",
                "speed", "MTU", "NCCL", "addresses", "kind");
  out << buf;
  for (const NetInterface& i : m.interfaces) {
    std::string addrs;
    for (const std::string& a : i.addresses) addrs += (addrs.empty() ? "" : " ") + a;
    if (addrs.empty()) addrs = "-";
    std::string speed = i.speed_mbps > 0 ? std::to_string(i.speed_mbps) + " Mb/s" : "-";
    std::string kind = virtual_interface_reason(i);
    if (kind.empty()) kind = i.is_virtual ? "virtual" : "physical";
    bool picked = false;
    for (const std::string& n : pick.names) picked = picked || n == i.name;
    std::snprintf(buf, sizeof buf, "  %-12s %-8s %-10s %-6s %-5s %-30s %s\n", i.name.c_str(),
                  i.operstate.empty() ? (i.up ? "up" : "down") : i.operstate.c_str(),
                  speed.c_str(), i.mtu < 0 ? "?" : std::to_string(i.mtu).c_str(),
                  picked ? "yes" : "", addrs.c_str(), kind.c_str());
    out << buf;
  }
  std::string names;
  for (const std::string& n : pick.names) names += (names.empty() ? "" : ",") + n;
  out << "  NCCL would use: " << (names.empty() ? "nothing" : names) << " (" << pick.rule << ")\n";

  out << "\nNCCL settings\n";
  auto settings = effective_nccl_settings(m);
  if (settings.empty()) out << "  none set (NCCL's defaults)\n";
  for (const auto& [name, s] : settings) out << "  " << name << "=" << s.value << "   (" << s.source << ")\n";
  for (const auto& [name, value] : m.environment)
    if (name.rfind("NCCL_", 0) != 0) out << "  " << name << "=" << value << "   (environment)\n";
  for (const NcclConfigFile& f : m.config_files) {
    out << "  file " << f.path << " [" << f.role << "]: "
        << (!f.exists ? "absent" : std::to_string(f.entries.size()) + " setting(s)")
        << (f.read_by_nccl ? "" : ", not read (NCCL_CONF_FILE is set)") << "\n";
  }

  if (!m.frameworks.empty() || !m.frameworks_note.empty()) {
    out << "\nFrameworks (" << m.frameworks_note << ")\n";
    for (const FrameworkInfo& f : m.frameworks)
      out << "  " << f.name << " " << f.version
          << (f.cuda.empty() ? ", CPU-only build" : ", CUDA " + f.cuda)
          << (f.cudnn.empty() ? "" : ", cuDNN " + f.cudnn) << (f.nccl.empty() ? "" : ", NCCL " + f.nccl)
          << "\n";
  }

  if (p2p != nullptr) {
    out << "\nP2P test (timed allreduce, P2P on vs NCCL_P2P_DISABLE=1)\n";
    if (!p2p->ran) out << "  cannot run: " << p2p->why_not << "\n";
    for (const std::string& line : p2p->lines) out << "  " << line << "\n";
  }

  int errors = 0, warnings = 0;
  out << "\nVerdicts\n";
  if (verdicts.empty()) out << "  nothing to report\n";
  for (const Verdict& v : verdicts) {
    errors += v.severity == Severity::kError;
    warnings += v.severity == Severity::kWarning;
    out << "  [" << to_string(v.severity) << "] " << v.title << "\n";
    if (!v.reason.empty()) out << "      why: " << v.reason << "\n";
    if (!v.fix.empty()) out << "      fix: " << v.fix << "\n";
  }
  out << "\n" << errors << " error(s), " << warnings << " warning(s)\n";
  return out.str();
}

std::string render_json(const MachineDescription& m, const BuildFacts& b,
                        const std::vector<Verdict>& verdicts, const P2pTestResult* p2p) {
  json::Writer w;
  w.begin_object().value("host", m.host);
  w.begin_object("driver")
      .value("present", m.driver.present)
      .value("version", m.driver.version)
      .value("cuda_driver_version", m.driver.cuda_driver_version)
      .value("why_absent", m.driver.why_absent)
      .end_object();
  w.begin_object("build")
      .value("cuda", b.have_cuda ? b.cuda_version : "none")
      .value("nccl", b.nccl_version_code > 0 ? b.nccl_version : "none")
      .value("nccl_version_code", b.nccl_version_code)
      .value("min_compute_capability", b.min_compute_capability)
      .end_object();
  auto lib = [&w](const char* key, const LibraryFound& l) {
    w.begin_object(key).value("found", l.found).value("version", l.version).value("code", l.code)
        .value("path", l.path).value("note", l.note);
    w.begin_array("missing");
    for (const std::string& f : l.missing) w.value({}, f);
    w.end_array().end_object();
  };
  lib("cuda_runtime", m.cuda_runtime);
  lib("nccl_runtime", m.nccl_runtime);
  w.begin_array("gpus");
  for (const GpuInfo& g : m.gpus) {
    w.begin_object().value("index", g.index).value("name", g.name).value("uuid", g.uuid)
        .value("pci_bus_id", g.pci_bus_id).value("memory_total", g.memory_total)
        .value("memory_free", g.memory_free)
        .value("compute_capability", g.cc_major < 0 ? std::string()
                                                    : std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor))
        .value("numa_node", g.numa_node).value("utilization_gpu", g.utilization_gpu)
        .value("utilization_memory", g.utilization_memory).value("active_nvlinks", g.active_nvlinks)
        .end_object();
  }
  w.end_array().begin_array("pairs");
  for (const GpuPair& p : m.pairs) {
    w.begin_object().value("a", p.a).value("b", p.b);
    if (p.cuda_peer_access) w.value("cuda_peer_access", *p.cuda_peer_access);
    else w.null("cuda_peer_access");
    w.value("nvml_p2p_read", p.nvml_p2p_read).value("common_ancestor", p.common_ancestor)
        .value("topology", topo_cell(&p)).value("nvlinks", p.nvlinks).end_object();
  }
  w.end_array();
  auto opt = [&w](const char* key, const std::optional<bool>& v) {
    if (v) w.value(key, *v);
    else w.null(key);
  };
  w.begin_object("pcie");
  opt("acs_enabled", m.pcie.acs_enabled);
  w.value("acs_where", m.pcie.acs_where);
  opt("iommu_enabled", m.pcie.iommu_enabled);
  opt("virtual_machine", m.pcie.virtual_machine);
  w.value("hypervisor", m.pcie.hypervisor).end_object();
  NcclInterfacePick pick = pick_for(m);
  w.begin_array("interfaces");
  for (const NetInterface& i : m.interfaces) {
    bool picked = false;
    for (const std::string& n : pick.names) picked = picked || n == i.name;
    w.begin_object().value("name", i.name).begin_array("addresses");
    for (const std::string& a : i.addresses) w.element(a);
    w.end_array().value("up", i.up).value("operstate", i.operstate).value("speed_mbps", i.speed_mbps)
        .value("mtu", i.mtu).value("loopback", i.loopback).value("bridge", i.bridge)
        .value("virtual", i.is_virtual).value("kind", virtual_interface_reason(i))
        .value("nccl_would_use", picked).end_object();
  }
  w.end_array().begin_object("nccl_interfaces").begin_array("names");
  for (const std::string& n : pick.names) w.element(n);
  w.end_array().value("rule", pick.rule).end_object();
  w.begin_array("nccl_settings");
  for (const auto& [name, s] : effective_nccl_settings(m))
    w.begin_object().value("name", name).value("value", s.value).value("source", s.source).end_object();
  w.end_array().begin_object("environment");
  for (const auto& [name, value] : m.environment) w.value(name, value);
  w.end_object().begin_array("nccl_config_files");
  for (const NcclConfigFile& f : m.config_files) {
    w.begin_object().value("path", f.path).value("role", f.role).value("exists", f.exists)
        .value("read_by_nccl", f.read_by_nccl).begin_object("entries");
    for (const auto& [k, v] : f.entries) w.value(k, v);
    w.end_object().end_object();
  }
  w.end_array();
  w.begin_array("frameworks");
  for (const FrameworkInfo& f : m.frameworks)
    w.begin_object().value("name", f.name).value("version", f.version).value("cuda", f.cuda)
        .value("cudnn", f.cudnn).value("nccl", f.nccl).end_object();
  w.end_array().value("frameworks_note", m.frameworks_note);
  if (p2p != nullptr) {
    w.begin_object("p2p_test").value("ran", p2p->ran).value("why_not", p2p->why_not)
        .value("busbw_p2p_gbs", p2p->busbw_p2p_gbs).value("busbw_no_p2p_gbs", p2p->busbw_no_p2p_gbs)
        .value("error_p2p", p2p->error_p2p).value("error_no_p2p", p2p->error_no_p2p)
        .begin_array("lines");
    for (const std::string& l : p2p->lines) w.element(l);
    w.end_array().end_object();
  }
  w.begin_array("verdicts");
  for (const Verdict& v : verdicts)
    w.begin_object().value("severity", to_string(v.severity)).value("id", v.id)
        .value("title", v.title).value("reason", v.reason).value("fix", v.fix).end_object();
  w.end_array().value("exit_code", exit_code(verdicts)).end_object();
  return w.str() + "\n";
}

}  // namespace hvrun::doctor
