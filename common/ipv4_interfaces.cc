#include "common/ipv4_interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <sstream>

namespace hvrun {

std::vector<Ipv4Interface> list_ipv4_interfaces() {
  std::vector<Ipv4Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text) == nullptr) continue;
    out.push_back(Ipv4Interface{it->ifa_name, text, (it->ifa_flags & IFF_LOOPBACK) != 0});
  }
  ::freeifaddrs(list);
  return out;
}

Result<std::string> address_of_named_interface(const std::string& variable,
                                               const std::string& names,
                                               const std::vector<Ipv4Interface>& interfaces) {
  std::istringstream in(names);
  for (std::string name; std::getline(in, name, ',');)
    for (const Ipv4Interface& iface : interfaces)
      if (!name.empty() && iface.name == name) return iface.address;
  std::string have;
  for (const Ipv4Interface& iface : interfaces)
    have += (have.empty() ? "" : ", ") + iface.name + " " + iface.address;
  return invalid_argument(variable + "=" + names + " names no IPv4 interface of this host (it has " +
                          (have.empty() ? std::string("none") : have) +
                          "): name one of them, or set HVRUN_DATA_ADDR to the address to use");
}

}  // namespace hvrun
