// hvrun's end of one host's agent: the remote shell (or, for the launch host itself, the agent
// process) with its stdin/stdout/stderr, and what the agent reported before the job started.
//
// agent_links.h reads every link on the launcher's event loop, from the agent's HELLO to its BYE;
// what an agent says before its job starts (HELLO, IFACE, PROBED, ...) lands here.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/remote/agent_protocol.h"
#include "launcher/plan/network_choice.h"
#include "launcher/process/orphan_guard.h"

namespace hvrun::launcher {

struct AgentLink {
  std::string host;
  std::string program;  // what was run (ssh, or hvrun for the launch host)
  pid_t pid = -1;       // its process group too
  int in_fd = -1, out_fd = -1, err_fd = -1;
  FrameReader reader;
  std::string err_text;  // the remote shell's stderr (ssh's own messages), its last 4 KiB

  std::string version;  // from HELLO
  bool hello = false;
  bool interfaces_done = false;
  bool probes_done = false;
  std::vector<NetInterface> interfaces;
  std::vector<ProbeOutcome> probes;  // prober = host

  bool exited = false;
  int wait_status = 0;
  std::string failure;  // set when the agent could not be used (why, naming the host)

  // Sends one frame; false when the agent is gone.
  bool send(const std::string& bytes);
};

// Starts `argv` as a host's agent (stdin/stdout/stderr piped, own process group, watched by
// `guard`) in hvrun's environment, less the variables `leave_out` names (when given).
Result<AgentLink> start_agent_link(const std::string& host, const std::vector<std::string>& argv,
                                   OrphanGuard* guard,
                                   bool (*leave_out)(const std::string& name) = nullptr);

// Records a frame an agent sends before its job starts (HELLO, IFACE, IFACES_DONE, PROBED,
// PROBES_DONE) in `link`; false for any other frame.
bool apply_prestart_frame(AgentLink& link, const Frame& f);

}  // namespace hvrun::launcher
