// The processes this process started itself (workers, remote shells, the orphan guard, a host
// discovery script), so that a subreaper can tell them from what was handed to it.
//
// A subreaper (stray_processes.h) inherits every orphan below it: a worker's double-forked
// daemon becomes its child just as a worker is. The kernel does not say which children were
// forked and which were inherited, so every place that starts a child records it here. This is
// process-wide on purpose: which children a process forked is a fact of the process, like its
// pid, and the fork sites (process/, elastic/) share nothing else.
//
// Thread-safe: records and questions may come from any thread.
#pragma once

#include <sys/types.h>

namespace hvrun::launcher {

// `pid` was started by this process (call right after fork, clone or spawn succeeded).
void record_own_child(pid_t pid);

// Whether `pid` is a process this process started (its start time is compared as well, so a
// pid the kernel reused for another process does not count).
bool is_own_child(pid_t pid);

}  // namespace hvrun::launcher
