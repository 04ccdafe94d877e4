// Runs a child process for the doctor (the P2P test's children, `hvrun -H ...` for other hosts) and
// for the hosts' health checks (launcher/health/) with a hard deadline: the child gets its own
// process group and PR_SET_PDEATHSIG, and the whole group is killed when the deadline passes.
// Nothing outlives the call.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace hvrun::doctor {

struct ChildResult {
  int exit_code = -1;      // exit status, 128+signal when killed by a signal
  bool timed_out = false;  // the deadline passed and the group was killed
  std::string output;      // stdout and stderr together
};

// `started` (may be empty) hears the child's pid as soon as it runs: a caller that is a child
// subreaper records it as its own (launcher/process/own_children.h).
ChildResult run_child_process(const std::vector<std::string>& argv,
                              const std::vector<std::pair<std::string, std::string>>& env,
                              double timeout_seconds,
                              const std::function<void(pid_t)>& started = nullptr);

// This executable's absolute path (/proc/self/exe), for starting ourselves again.
std::string self_executable();

}  // namespace hvrun::doctor
