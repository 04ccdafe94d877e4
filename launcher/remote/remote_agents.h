// The placement of a job whose ranks start through agents (docs/design/launch.md): one
// `hvrun agent` per host (over the remote shell; the launch host's own agent directly), checked
// before anything starts, the network chosen from what the agents report and reach, then each
// host's agent starts that host's ranks; an elastic job's new hosts get an agent of their own
// (remote_growth.h), so a rank planned for a host starts on that host.
//
//  1. Pre-flight, within --start-timeout: every host's agent must answer HELLO with this hvrun's
//     version; each failure names the host and carries the remote shell's own message.
//  2. Interfaces: every agent lists its interfaces with a probe listener on each; every agent
//     probes the others' candidates and the launch host's; network_choice.h picks per host.
//  3. The attempt's coordinator listens on the launch host's chosen address; each rank's
//     environment gets its host's HVRUN_DATA_ADDR, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME (user
//     NCCL_* win), the forwarded environment (env_forwarding.h) and -x; the secret goes over the
//     agent's stdin.
//  4. multi_host_runner.h runs the job.
#pragma once

#include <memory>

#include "launcher/attempt/placement.h"

namespace hvrun::launcher {

class AgentStart;

class RemoteAgents final : public Placement {
 public:
  RemoteAgents();
  ~RemoteAgents() override;

  bool ranks_are_local() const override { return false; }
  // peer_access_probe(): none, GPU pairs of other hosts cannot be asked from here (--nccl-p2p
  // auto leaves P2P to NCCL).
  int run(Attempt& attempt) override;
  void complete_autopsy(const v1::AutopsyJobReport& collected, AutopsyReport report) override;

 private:
  std::unique_ptr<AgentStart> start_;
};

}  // namespace hvrun::launcher
