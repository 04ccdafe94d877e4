// Reachability probes between hosts: each host listens on every candidate address (port 0) and
// its peers try a TCP connect to each. The kernel completes the handshake from the listen
// backlog, so nobody has to accept; a connect that succeeds proves the route both ways.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/plan/network_interfaces.h"

namespace hvrun::launcher {

// Opens a listener on each interface's address (loopback and excluded ones too: harmless) and
// records its port in `probe_port`. Returns the sockets; close them with close_listeners.
std::vector<int> open_probe_listeners(std::vector<NetInterface>& interfaces);
void close_listeners(std::vector<int>& fds);

struct ProbeResult {
  std::string target;  // "ADDR:PORT"
  bool reached = false;
  std::string error;
};

// Connects to every "ADDR:PORT" at once; each gets `timeout`.
std::vector<ProbeResult> probe_targets(const std::vector<std::string>& targets,
                                       std::chrono::milliseconds timeout);

}  // namespace hvrun::launcher
