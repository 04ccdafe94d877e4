// Which interface each host of a multi-host job uses, from what the agents reported and what
// their peers could reach.
//
// An interface counts only when every other host reached it (a TCP connect to the agent's probe
// listener on that address); among those the best-ranked wins (network_interfaces.h). With
// --network-interface the listed names are taken in order without probing.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/plan/network_interfaces.h"

namespace hvrun::launcher {
using Environment_t = std::map<std::string, std::string>;  // = rank_environment.h's Environment
}  // namespace hvrun::launcher

namespace hvrun::launcher {

struct HostInterfaces {
  std::string host;  // as given in -H; "" for the launch host's own (coordinator) candidates
  std::vector<NetInterface> interfaces;
};

// One probe: `prober` tried to connect to ADDR:PORT.
struct ProbeOutcome {
  std::string prober;
  std::string target;  // "ADDR:PORT"
  bool reached = false;
  std::string error;  // why not
};

struct InterfaceChoice {
  std::string host;
  std::string interface;
  std::string address;
  std::vector<std::string> reasons;  // one line per interface considered (for --verbose)
};

// `peers`: hosts whose probes count for `target` (everyone but the target itself).
// `forced`: --network-interface names, empty for probing.
Result<InterfaceChoice> choose_interface(const HostInterfaces& target,
                                         const std::vector<std::string>& peers,
                                         const std::vector<ProbeOutcome>& probes,
                                         const std::vector<std::string>& forced);

// "a,b" -> {"a","b"} (empty entries dropped).
std::vector<std::string> split_names(const std::string& text);

}  // namespace hvrun::launcher

namespace hvrun::launcher {

// Network variables for the workers of one host: NCCL_SOCKET_IFNAME (=NAME: exactly that
// interface), GLOO_SOCKET_IFNAME, and NCCL_IB_DISABLE=1 with --network ethernet. A variable the
// user set (present in `user`) is left alone and reported as such in `reasons`.
Environment_t host_network_environment(const InterfaceChoice& choice, const std::string& network,
                                       const Environment_t& user,
                                       std::vector<std::string>* reasons);

}  // namespace hvrun::launcher
