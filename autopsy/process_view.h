// What hvrun (or the coordinator daemon) sees of a rank's process that did not answer an
// autopsy: the kernel's state of the process and of each of its threads (common/proc_state.h),
// filled into the job report: read here for this host's processes, or from the snapshot another
// host's agent sent (launcher/remote/agent_process_views.h).
#pragma once

#include <sys/types.h>

#include "common/proc_state.h"
#include "hvrun.pb.h"

namespace hvrun {

// The process `pid` of this host as /proc shows it now ("gone" when it has exited).
v1::AutopsyProcessState read_process_view(pid_t pid);
// The same from a snapshot of process `pid` (taken here or on its host).
v1::AutopsyProcessState process_view_of(const ProcessSnapshot& snapshot, pid_t pid);

// Fills `process` for every rank that did not answer and has none yet: read here when
// `ranks_are_local` or the rank registered with host name `this_host` (when not empty), else a
// note that the process runs on another host.
void add_process_views(v1::AutopsyJobReport& report, bool ranks_are_local,
                       const std::string& this_host = "");

}  // namespace hvrun
