// Starting one worker: fork + exec with the worker's stdout/stderr on pipes, in a process group
// of its own (so a signal reaches its whole tree), with PR_SET_PDEATHSIG so that it dies with
// hvrun even when hvrun is killed with SIGKILL (see orphan_guard.h for its descendants).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun::launcher {

struct SpawnedWorker {
  pid_t pid = -1;  // also its process group id
  int stdout_fd = -1;
  int stderr_fd = -1;
  int stdin_fd = -1;  // write end of its stdin, when asked for (pipe_stdin)
};

// Resolves COMMAND the way execvp would (PATH search unless it contains '/'); the error says what
// is wrong in one line.
Result<std::string> resolve_command(const std::string& command, const char* path_env);

// Starts `path` with `argv` and `envp` ("KEY=VALUE"), stdin from /dev/null. Returns once the
// exec succeeded, or an error carrying exec's reason. Call from the thread that lives as long as
// the job (PR_SET_PDEATHSIG fires when the forking *thread* exits).
// With `pipe_stdin` its stdin is a pipe whose write end is returned (the remote shell that
// carries a multi-host agent's protocol). Non-empty `cpus`: the worker runs on those CPUs only
// (--bind-to, cpu_binding.h).
Result<SpawnedWorker> spawn_worker(const std::string& path, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& envp, bool pipe_stdin = false,
                                   const std::vector<int>& cpus = {});

// Reaps `pid` if it has exited, without waiting: true with its wait status in `*wait_status`,
// false while it runs.
bool reap_if_exited(pid_t pid, int* wait_status);

}  // namespace hvrun::launcher
