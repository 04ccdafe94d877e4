// Questions about a worker's process group (its pid is the group id).
#pragma once

#include <sys/types.h>

namespace hvrun::launcher {

// True while some process of group `pgid` is still running. Zombies do not count: once a
// worker's leader is gone its orphans are reparented to init, which may reap them late, and
// kill(-pgid, 0) alone would keep answering "alive" until it does.
bool group_has_live_members(pid_t pgid);

}  // namespace hvrun::launcher
