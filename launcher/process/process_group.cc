#include "launcher/process/process_group.h"

#include <signal.h>

#include <cerrno>
#include <vector>

#include "launcher/process/proc_table.h"

namespace hvrun::launcher {

bool group_has_live_members(pid_t pgid) {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  const std::vector<ProcStat> all = list_processes();
  if (all.empty()) return true;  // cannot tell: assume alive (the grace timer still bounds)
  bool alive = false;
  for (const ProcStat& p : all) alive |= p.pgrp == pgid && p.alive();
  return alive;
}

bool signal_group(pid_t pgid, int sig) {
  const bool delivered = ::kill(-pgid, sig) == 0;
  if (delivered && sig != SIGKILL && sig != SIGCONT) ::kill(-pgid, SIGCONT);
  return delivered;
}

}  // namespace hvrun::launcher
