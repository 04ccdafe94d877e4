#include "launcher/plan/network_interfaces.h"

#include <sys/stat.h>

#include <algorithm>

#include "common/ipv4_interfaces.h"

namespace hvrun::launcher {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Lower is better. Names that physical NICs get (eth0, enp3s0, ib0, bond0) come first.
int name_preference(const std::string& name) {
  for (const char* p : {"eth", "en", "ib", "bond", "team"})
    if (starts_with(name, p)) return 0;
  return 1;
}

}  // namespace

std::vector<NetInterface> list_local_interfaces() {
  std::vector<NetInterface> out;
  for (const Ipv4Interface& found : list_ipv4_interfaces()) {
    NetInterface iface;
    iface.name = found.name;
    iface.address = found.address;
    iface.loopback = found.loopback;
    struct stat st {};
    iface.bridge = ::stat(("/sys/class/net/" + iface.name + "/bridge").c_str(), &st) == 0;
    out.push_back(iface);
  }
  return out;
}

std::string exclusion_reason(const NetInterface& iface) {
  if (iface.loopback || iface.name == "lo" || starts_with(iface.address, "127.")) return "loopback";
  if (starts_with(iface.name, "docker")) return "docker interface";
  if (iface.bridge || starts_with(iface.name, "br-") || starts_with(iface.name, "virbr") ||
      starts_with(iface.name, "lxcbr") || starts_with(iface.name, "cni") ||
      starts_with(iface.name, "podman"))
    return "virtual bridge";
  return "";
}

std::vector<NetInterface> rank_candidates(const std::vector<NetInterface>& all,
                                          std::vector<std::string>* excluded) {
  std::vector<NetInterface> out;
  for (const NetInterface& iface : all) {
    std::string why = exclusion_reason(iface);
    if (why.empty()) {
      out.push_back(iface);
    } else if (excluded != nullptr) {
      excluded->push_back(iface.name + " (" + iface.address + "): " + why +
                          ", never used for multi-host jobs");
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const NetInterface& a, const NetInterface& b) {
    return name_preference(a.name) < name_preference(b.name);
  });
  return out;
}

std::string interface_flags(const NetInterface& iface) {
  std::string flags;
  if (iface.loopback) flags += "loopback,";
  if (iface.bridge) flags += "bridge,";
  if (!flags.empty()) flags.pop_back();
  return flags;
}

void apply_interface_flags(const std::string& flags, NetInterface& iface) {
  iface.loopback = flags.find("loopback") != std::string::npos;
  iface.bridge = flags.find("bridge") != std::string::npos;
}

}  // namespace hvrun::launcher
