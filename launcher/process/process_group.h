// A worker's process group (its pid is the group id): questions about it, and signalling it.
#pragma once

#include <sys/types.h>

namespace hvrun::launcher {

// True while some process of group `pgid` is still running. Zombies do not count: once a
// worker's leader is gone its orphans are reparented to init, which may reap them late, and
// kill(-pgid, 0) alone would keep answering "alive" until it does.
bool group_has_live_members(pid_t pgid);

// Sends `sig` to every process of group `pgid`, then SIGCONT unless `sig` is SIGKILL: a stopped
// process (SIGSTOP, a shell's ^Z) acts on a signal only once it runs again, and would otherwise
// hold a teardown for the whole grace period. Returns whether `sig` reached the group.
bool signal_group(pid_t pgid, int sig);

}  // namespace hvrun::launcher
