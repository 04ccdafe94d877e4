// Which network interfaces NCCL's socket transport and bootstrap would use, by NCCL's own rules
// (src/misc/socket.cc, ncclFindInterfaces; docs/gpu-facts.md):
//   NCCL_SOCKET_IFNAME (longer than one character): comma list of name prefixes; a leading '='
//   means exact names, '^' excludes, '^=' both. Unset: the first non-empty of ib*; the subnet of
//   NCCL_COMM_ID; anything but docker*/lo/virbr*; docker*; lo; virbr*.
// Only interfaces with an IPv4 or a non-loopback IPv6 address count (NCCL_SOCKET_FAMILY narrows
// that), in the kernel's order, at most 16. NCCL tests neither reachability nor speed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/doctor/machine.h"

namespace hvrun::doctor {

struct NcclInterfacePick {
  std::vector<std::string> names;  // what NCCL would use, first = bootstrap
  std::string rule;                // which rule chose them, for the report
  bool user_list = false;          // chosen by NCCL_SOCKET_IFNAME
};

NcclInterfacePick nccl_socket_interfaces(const std::vector<NetInterface>& interfaces,
                                         const std::optional<std::string>& socket_ifname,
                                         const std::optional<std::string>& comm_id,
                                         const std::optional<std::string>& socket_family);

// True when `name` matches NCCL's list syntax `spec` ("eth", "=eth0", "^docker,lo", "^=lo").
bool nccl_if_list_matches(const std::string& name, const std::string& spec);

// An interface a multi-host job should not run over, and why ("loopback", "Linux bridge",
// "docker", "virtual (veth)"...); "" when it looks like a real NIC.
std::string virtual_interface_reason(const NetInterface& iface);

}  // namespace hvrun::doctor
