// Network interfaces as NCCL sees them (getifaddrs, in the kernel's order) with what
// /sys/class/net adds: state, speed, MTU, bridge, virtual.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <filesystem>
#include <fstream>

#include "launcher/doctor/probe.h"

namespace hvrun::doctor {
namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

int read_int(const std::string& path) {
  std::string text = read_line(path);
  try {
    return text.empty() ? -1 : std::stoi(text);
  } catch (...) {
    return -1;
  }
}

int prefix_length(const sockaddr* mask) {
  if (mask == nullptr) return -1;
  const auto* bytes = mask->sa_family == AF_INET
                          ? reinterpret_cast<const unsigned char*>(
                                &reinterpret_cast<const sockaddr_in*>(mask)->sin_addr)
                          : reinterpret_cast<const unsigned char*>(
                                &reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
  int n = mask->sa_family == AF_INET ? 4 : 16, bits = 0;
  for (int i = 0; i < n; ++i) bits += __builtin_popcount(bytes[i]);
  return bits;
}

NetInterface& entry(std::vector<NetInterface>& all, const std::string& name) {
  for (NetInterface& i : all)
    if (i.name == name) return i;
  all.push_back(NetInterface{});
  all.back().name = name;
  return all.back();
}

}  // namespace

void probe_network(MachineDescription& m) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_name == nullptr) continue;
    NetInterface& i = entry(m.interfaces, ifa->ifa_name);
    i.up = (ifa->ifa_flags & IFF_UP) != 0;
    i.loopback = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    if (ifa->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (ifa->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(ifa->ifa_addr)->sin_addr, text, sizeof text);
      i.has_ipv4 = true;
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      const in6_addr& a6 = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr)->sin6_addr;
      inet_ntop(AF_INET6, &a6, text, sizeof text);
      if (!IN6_IS_ADDR_LOOPBACK(&a6)) i.has_routable_ipv6 = true;  // NCCL skips only ::1
    } else {
      continue;
    }
    int prefix = prefix_length(ifa->ifa_netmask);
    i.addresses.push_back(std::string(text) + (prefix >= 0 ? "/" + std::to_string(prefix) : ""));
  }
  freeifaddrs(list);
  for (NetInterface& i : m.interfaces) {
    const std::string dir = "/sys/class/net/" + i.name;
    std::error_code ec;
    i.operstate = read_line(dir + "/operstate");
    i.mtu = read_int(dir + "/mtu");
    i.speed_mbps = read_int(dir + "/speed");  // EINVAL (-1) for virtual and down links
    i.bridge = std::filesystem::exists(dir + "/bridge", ec);
    i.is_virtual = !std::filesystem::exists(dir + "/device", ec);
  }
}

}  // namespace hvrun::doctor
