#include "launcher/doctor/nccl_interfaces.h"

#include <arpa/inet.h>

#include <cstdint>
#include <sstream>

namespace hvrun::doctor {
namespace {

constexpr size_t kMaxInterfaces = 16;  // NCCL's MAX_IFS

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    // NCCL's list entries may carry ":port"; the port does not matter for names.
    if (auto colon = item.find(':'); colon != std::string::npos) item.resize(colon);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool eligible(const NetInterface& iface, const std::optional<std::string>& family) {
  if (family == "AF_INET") return iface.has_ipv4;
  if (family == "AF_INET6") return iface.has_routable_ipv6;
  return iface.has_ipv4 || iface.has_routable_ipv6;
}

std::vector<std::string> find(const std::vector<NetInterface>& all, const std::string& spec,
                              const std::optional<std::string>& family) {
  std::vector<std::string> out;
  for (const NetInterface& iface : all) {
    if (out.size() >= kMaxInterfaces) break;
    if (eligible(iface, family) && nccl_if_list_matches(iface.name, spec)) out.push_back(iface.name);
  }
  return out;
}

std::optional<uint32_t> ipv4(const std::string& text) {
  in_addr addr{};
  if (inet_pton(AF_INET, text.c_str(), &addr) != 1) return std::nullopt;
  return ntohl(addr.s_addr);
}

// The interface whose IPv4 subnet holds NCCL_COMM_ID's address ("10.0.0.1:1234").
std::vector<std::string> match_subnet(const std::vector<NetInterface>& all, const std::string& comm_id) {
  auto target = ipv4(comm_id.substr(0, comm_id.find(':')));
  if (!target) return {};  // a host name: NCCL resolves it; the doctor does not guess
  for (const NetInterface& iface : all) {
    for (const std::string& cidr : iface.addresses) {
      size_t slash = cidr.find('/');
      auto addr = ipv4(cidr.substr(0, slash));
      if (!addr || slash == std::string::npos) continue;
      int prefix = std::stoi(cidr.substr(slash + 1));
      uint32_t mask = prefix <= 0 ? 0 : prefix >= 32 ? 0xffffffffu : ~((1u << (32 - prefix)) - 1);
      if ((*addr & mask) == (*target & mask)) return {iface.name};
    }
  }
  return {};
}

}  // namespace

bool nccl_if_list_matches(const std::string& name, const std::string& spec_in) {
  std::string spec = spec_in;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool listed = false;
  for (const std::string& entry : split_commas(spec)) {
    if (exact ? name == entry : name.compare(0, entry.size(), entry) == 0) {
      listed = true;
      break;
    }
  }
  return listed != exclude;
}

NcclInterfacePick nccl_socket_interfaces(const std::vector<NetInterface>& all,
                                         const std::optional<std::string>& socket_ifname,
                                         const std::optional<std::string>& comm_id,
                                         const std::optional<std::string>& family) {
  NcclInterfacePick pick;
  if (socket_ifname && socket_ifname->size() > 1) {
    pick.user_list = true;
    pick.names = find(all, *socket_ifname, family);
    pick.rule = "NCCL_SOCKET_IFNAME=" + *socket_ifname;
    return pick;
  }
  std::string unset = socket_ifname ? "NCCL_SOCKET_IFNAME='" + *socket_ifname +
                                          "' is one character, which NCCL ignores"
                                    : "NCCL_SOCKET_IFNAME unset";
  if (pick.names = find(all, "ib", family); !pick.names.empty()) {
    pick.rule = unset + ": InfiniBand (ib*) interfaces come first";
    return pick;
  }
  if (comm_id && comm_id->size() > 1) {
    if (pick.names = match_subnet(all, *comm_id); !pick.names.empty()) {
      pick.rule = unset + ": the interface in NCCL_COMM_ID's subnet";
      return pick;
    }
  }
  if (pick.names = find(all, "^docker,lo,virbr", family); !pick.names.empty()) {
    pick.rule = unset + ": no ib*, so every interface but docker*, lo* and virbr*";
    return pick;
  }
  for (const char* fallback : {"docker", "lo", "virbr"}) {
    if (pick.names = find(all, fallback, family); !pick.names.empty()) {
      pick.rule = unset + ": nothing but " + std::string(fallback) + "* has an address";
      return pick;
    }
  }
  pick.rule = unset + ": no interface has an address (NCCL fails to bootstrap)";
  return pick;
}

std::string virtual_interface_reason(const NetInterface& iface) {
  const std::string& n = iface.name;
  auto starts = [&n](const char* prefix) { return n.rfind(prefix, 0) == 0; };
  if (iface.loopback || starts("lo")) return "loopback";
  if (starts("docker")) return "docker bridge";
  if (starts("virbr")) return "libvirt bridge";
  if (starts("br-")) return "docker network bridge";
  if (starts("veth")) return "virtual Ethernet pair (containers)";
  if (starts("cni") || starts("flannel") || starts("cali") || starts("weave") || starts("kube"))
    return "container network overlay";
  if (starts("tun") || starts("tap") || starts("wg") || starts("tailscale") || starts("zt"))
    return "VPN / tunnel";
  if (iface.bridge) return "Linux bridge";
  return "";
}

}  // namespace hvrun::doctor
