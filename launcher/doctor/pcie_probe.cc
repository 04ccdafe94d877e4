// PCIe facts that make the driver's "P2P OK" untrustworthy (docs/gpu-facts.md): ACS on a
// bridge (what `lspci -vvv | grep ACSCtl` shows), the IOMMU, a virtual machine. ACS needs the
// extended configuration space, which only root can read: otherwise it stays unknown.
#include <filesystem>
#include <fstream>
#include <iterator>

#include "launcher/doctor/probe.h"

namespace hvrun::doctor {
namespace {

constexpr unsigned kExtCapStart = 0x100;
constexpr unsigned kAcsCapId = 0x000D;
// ACS control bits that send peer-to-peer traffic up to the root complex instead of across the
// switch: P2P Request Redirect (bit 2) and P2P Completion Redirect (bit 3), lspci's
// "ReqRedir+ CmpltRedir+".
constexpr unsigned kAcsBlocksP2p = 0x4 | 0x8;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

unsigned u32(const std::string& b, unsigned off) {
  return static_cast<unsigned char>(b[off]) | static_cast<unsigned char>(b[off + 1]) << 8 |
         static_cast<unsigned char>(b[off + 2]) << 16 |
         static_cast<unsigned>(static_cast<unsigned char>(b[off + 3])) << 24;
}

}  // namespace

std::optional<bool> acs_redirects_p2p(const std::string& config) {
  if (config.size() < kExtCapStart + 4) return std::nullopt;
  unsigned off = kExtCapStart;
  for (int guard = 0; guard < 64 && off >= kExtCapStart && off + 8 <= config.size(); ++guard) {
    unsigned header = u32(config, off);
    if (header == 0 || header == 0xffffffffu) return false;
    if ((header & 0xffff) == kAcsCapId) {
      unsigned control = static_cast<unsigned char>(config[off + 6]) |
                         static_cast<unsigned char>(config[off + 7]) << 8;
      return (control & kAcsBlocksP2p) != 0;
    }
    off = header >> 20;
    if (off == 0) return false;
  }
  return false;
}

void probe_pcie(MachineDescription& m) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists("/sys/class/iommu", ec))
    m.pcie.iommu_enabled = !fs::is_empty("/sys/class/iommu", ec);

  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool flags_seen = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    flags_seen = true;
    m.pcie.virtual_machine = line.find(" hypervisor") != std::string::npos;
    break;
  }
  if (!flags_seen) m.pcie.virtual_machine.reset();
  if (m.pcie.virtual_machine == true) {
    std::ifstream vendor("/sys/class/dmi/id/sys_vendor");
    std::getline(vendor, m.pcie.hypervisor);
  }

  bool any_readable = false;
  for (const auto& dev : fs::directory_iterator("/sys/bus/pci/devices", ec)) {
    std::string cls = read_all(dev.path().string() + "/class");
    if (cls.rfind("0x0604", 0) != 0) continue;  // PCI-to-PCI bridges (switch ports, root ports)
    auto blocks = acs_redirects_p2p(read_all(dev.path().string() + "/config"));
    if (!blocks) continue;
    any_readable = true;
    if (*blocks) {
      m.pcie.acs_enabled = true;
      m.pcie.acs_where = dev.path().filename().string();
      return;
    }
  }
  if (any_readable) m.pcie.acs_enabled = false;
}

}  // namespace hvrun::doctor
