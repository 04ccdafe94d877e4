// Runs a child process for the doctor (the P2P test's children, `hvrun -H ...` for other hosts)
// with a hard deadline: the child gets its own process group and PR_SET_PDEATHSIG, and the whole
// group is killed when the deadline passes. Nothing outlives the call.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hvrun::doctor {

struct ChildResult {
  int exit_code = -1;      // exit status, 128+signal when killed by a signal
  bool timed_out = false;  // the deadline passed and the group was killed
  std::string output;      // stdout and stderr together
};

ChildResult run_child_process(const std::vector<std::string>& argv,
                              const std::vector<std::pair<std::string, std::string>>& env,
                              double timeout_seconds);

// This executable's absolute path (/proc/self/exe), for starting ourselves again.
std::string self_executable();

}  // namespace hvrun::doctor
