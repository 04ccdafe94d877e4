// hvrun's end of one host's agent: the remote shell (or, for the launch host itself, the agent
// process) with its stdin/stdout/stderr, and what the agent reported before the job started.
//
// Before the workers start, hvrun talks to every agent at once through pump_until() (blocking,
// poll-based, bounded by a deadline); afterwards agent_links.h takes the descriptors over.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
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
  std::string err_text;  // the remote shell's stderr (ssh's own messages), last 8 KiB

  std::string version;  // from HELLO
  bool hello = false;
  bool interfaces_done = false;
  bool probes_done = false;
  std::vector<NetInterface> interfaces;
  std::vector<ProbeOutcome> probes;  // prober = host
  std::vector<std::string> notes;

  bool exited = false;
  int wait_status = 0;
  bool out_closed = false;
  std::string failure;  // set when the agent could not be used (why, naming the host)

  // Sends one frame; false when the agent is gone.
  bool send(const std::string& bytes);
};

// Starts `argv` as a host's agent (stdin/stdout/stderr piped, own process group, watched by
// `guard`).
Result<AgentLink> start_agent_link(const std::string& host, const std::vector<std::string>& argv,
                                   OrphanGuard* guard);

// Reads from every link (frames before the job starts: HELLO, IFACE, PROBED, ...) until
// `done(link)` holds for every link that has not failed, or `deadline`. A link whose process
// exits, or that sends garbage, gets `failure` set (`describe_exit` words it). On the deadline,
// every link not done gets `failure` = `late(link)`.
void pump_until(std::vector<AgentLink>& links, std::chrono::steady_clock::time_point deadline,
                const std::function<bool(const AgentLink&)>& done,
                const std::function<std::string(const AgentLink&)>& describe_exit,
                const std::function<std::string(const AgentLink&)>& late);

}  // namespace hvrun::launcher
