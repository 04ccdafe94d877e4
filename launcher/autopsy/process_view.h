// What the launcher sees of a rank's process that did not answer an autopsy: the kernel's state
// of the process and of each of its threads (common/proc_state.h), filled into the job report.
// Only for processes on this host: a rank elsewhere gets a note saying so.
#pragma once

#include <sys/types.h>

#include "hvrun.pb.h"

namespace hvrun::launcher {

// The process `pid` of this host as /proc shows it now ("gone" when it has exited).
v1::AutopsyProcessState read_process_view(pid_t pid);

// Fills `process` for every rank that did not answer: read here when `ranks_are_local`, else a
// note that the process runs on another host.
void add_process_views(v1::AutopsyJobReport& report, bool ranks_are_local);

}  // namespace hvrun::launcher
