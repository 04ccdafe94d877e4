// The command line that starts `hvrun agent` on a remote host, and what to tell the user when
// that fails.
#pragma once

#include <string>
#include <vector>

#include "common/settings.h"

namespace hvrun::launcher {

struct RemoteShellOptions {
  bool srun = false;              // --remote-launcher srun (or auto inside a Slurm allocation)
  std::string srun_args;          // --srun-args, split at spaces
  std::string rsh = "ssh";        // --rsh, split at spaces
  int port = 0;                   // --ssh-port; 0: the remote shell's default
  std::string identity_file;      // --ssh-identity-file
  double connect_timeout_s = 30;  // --start-timeout bounds ssh's TCP connect
  // `in_slurm_allocation`: SLURM_JOB_ID is set (auto picks srun).
  static RemoteShellOptions from_settings(const Settings& settings, bool in_slurm_allocation);
};

// argv for `rsh [options] HOST 'HVRUN_PATH' agent`. For ssh (rsh's program named ssh) BatchMode
// (never a password prompt) and ConnectTimeout are added; -p and -i whenever they are set.
// With `srun`: a one-task step on HOST that may share the allocation's resources with the
// others (--overlap), gets all of them on its node (--whole) without binding the agent, and so
// its workers, to one task's CPUs (--cpu-bind=none), unbuffered both ways (-u: the agent's
// frames are binary and not line-structured). Start it in srun_agent_environment().
std::vector<std::string> remote_agent_command(const RemoteShellOptions& options,
                                              const std::string& host,
                                              const std::string& hvrun_path);

// The same for `HVRUN_PATH WORDS...` (`agent`, `health-check ARGS`): the words are quoted for the
// remote shell (srun passes them as they are).
std::vector<std::string> remote_hvrun_command(const RemoteShellOptions& options,
                                              const std::string& host,
                                              const std::string& hvrun_path,
                                              const std::vector<std::string>& words);

// What srun reads from the allocation's environment to shape a step's tasks (SLURM_NTASKS,
// SLURM_CPUS_PER_TASK, SLURM_GPUS_PER_TASK, SLURM_MEM_PER_CPU, ...): an agent's step must get
// its node whole, not one task's share, so these are left out of srun's environment.
bool shapes_srun_tasks(const std::string& name);

// Quotes `word` for a POSIX shell (ssh hands the remote command to the user's shell).
std::string shell_quote(const std::string& word);

// Why the remote shell ended before the agent answered, for the user: names the host, carries
// the remote shell's own message (its last stderr lines) and says what to try.
std::string describe_remote_failure(const std::string& host, const std::string& rsh_program,
                                    int exit_code, const std::string& stderr_text,
                                    const std::string& hvrun_path);

}  // namespace hvrun::launcher
