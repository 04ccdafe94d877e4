// What the tests of hosts made of network namespaces (tests/multinode, tests/slurm) look at in
// /proc: which processes run which program, in which namespace, under which parent; and a
// program started in the background with its output in files, killed (its process group) and
// reaped when the test lets go of it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/subprocess.h"  // read_file

namespace hvrun::test {

std::string readlink_text(const std::string& path);
std::vector<std::string> cmdline_of(pid_t pid);
std::vector<pid_t> all_pids();
bool is_zombie(pid_t pid);
pid_t parent_of(pid_t pid);
// Live processes running `exe` (any namespace).
std::vector<pid_t> processes_running(const std::string& exe);
// The network namespace identity of a named namespace ("net:[inode]") and of a process.
std::string netns_of_name(const std::string& ns);
std::string netns_of_pid(pid_t pid);
// The `ip` command's path (run_process does not search PATH).
std::string ip_command();
// The `hvrun agent` process in the named network namespace `ns`, or -1. A child the agent forks
// (its orphan guard, a worker between clone and exec) shows the agent's command line for a
// moment: those are skipped.
pid_t hvrun_agent_in(const std::string& ns);

struct LoggedProcess {
  pid_t pid = -1;  // also its process group
  std::string out_path, err_path;
  // Its exit code (128+signal), or nullopt when it still runs after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  ~LoggedProcess();
};

// Starts `argv` (searched in PATH) in its own process group, stdout and stderr to
// DIR/NAME.out and DIR/NAME.err.
std::unique_ptr<LoggedProcess> start_logged(const std::vector<std::string>& argv,
                                            const std::string& dir, const std::string& name);

}  // namespace hvrun::test
