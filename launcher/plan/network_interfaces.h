// Network interfaces of a host, and which of them may carry a multi-host job.
//
// Each agent lists its host's IPv4 interfaces; hvrun ranks them (network_choice.h decides with
// the peers' probes). Loopback, docker and virtual bridges never carry a multi-host job: they
// exist on many hosts with the same addresses, and traffic to them stays on the host.
#pragma once

#include <string>
#include <vector>

namespace hvrun::launcher {

struct NetInterface {
  std::string name;     // "eth0"
  std::string address;  // IPv4, dotted
  bool loopback = false;
  bool bridge = false;  // a Linux bridge (/sys/class/net/NAME/bridge exists)
  int probe_port = 0;   // where the agent listens on `address` for the peers' probes; 0: none
};

// IPv4 addresses of the interfaces that are up, in the kernel's order.
std::vector<NetInterface> list_local_interfaces();

// Why `iface` must not carry a multi-host job ("loopback", "docker interface", ...), or "".
std::string exclusion_reason(const NetInterface& iface);

// Interfaces that may carry the job, best first (Ethernet/InfiniBand-style names before others,
// then the kernel's order); `excluded` receives "NAME (ADDR): reason" for the others.
std::vector<NetInterface> rank_candidates(const std::vector<NetInterface>& all,
                                          std::vector<std::string>* excluded);

// "loopback,bridge" <-> the flags, for the agent protocol.
std::string interface_flags(const NetInterface& iface);
void apply_interface_flags(const std::string& flags, NetInterface& iface);

}  // namespace hvrun::launcher
