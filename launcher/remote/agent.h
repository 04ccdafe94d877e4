// `hvrun agent`: the per-host half of a multi-host job, started by hvrun through the remote
// shell (ssh) on every host of the job. It speaks agent_protocol.h on stdin/stdout:
//
//  1. says HELLO (its version), lists the host's interfaces with a probe listener on each;
//  2. probes the peers' candidate addresses hvrun sends (PROBE), reports what it reached;
//  3. receives the workers' command, directory and environments (the job secret among them: over
//     the ssh channel, never on a command line), starts and pins them like the single-host
//     launcher does (own process group, PR_SET_PDEATHSIG, an orphan guard), streams their output
//     and exits back, forwards signals;
//  4. kills its workers' process groups at once when its stdin closes (the ssh connection or
//     hvrun went away) or when the coordinator stops answering, and on SIGHUP/SIGTERM/SIGINT.
//
// Single-threaded: once workers run, the launcher's event loop (supervisor/supervisor_loop.h)
// owns the pipes, signals and timers, over the same local workers a single-host job has
// (supervisor/local_workers.h).
#pragma once

#include <string>
#include <vector>

namespace hvrun::launcher {

// `args` are the words after "agent". Returns the process's exit code.
int run_agent(const std::vector<std::string>& args);

}  // namespace hvrun::launcher
