// This host's IPv4 interfaces that are up, and the address of an interface named in a
// GLOO_SOCKET_IFNAME-style list. Shared by the launcher (which ranks them for a multi-host job)
// and the worker library (which binds its Gloo endpoint to the one a variable names).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun {

struct Ipv4Interface {
  std::string name;     // "eth0"
  std::string address;  // dotted
  bool loopback = false;
};

// In the kernel's order.
std::vector<Ipv4Interface> list_ipv4_interfaces();

// `names` is "NAME[,NAME...]": the address of the first one in `interfaces`; an error naming
// `variable`, its value and the interfaces there are when none is.
Result<std::string> address_of_named_interface(const std::string& variable,
                                               const std::string& names,
                                               const std::vector<Ipv4Interface>& interfaces);

}  // namespace hvrun
