// What hvrun and hvrun-coordinator do with a finished autopsy (the coordinator's kAutopsy
// event): add the process state of ranks that did not answer (process_view.h), say the verdict
// first (verdict.h), then write the full report, JSON and text (report_files.h), and say where.
//
// Threads: the caller's (hvrun: the job supervisor's loop; the daemon: the coordinator's event
// thread).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "hvrun.pb.h"

namespace hvrun {

struct AutopsyReporting {
  std::string directory;        // autopsy_directory(--autopsy-dir, --output-filename)
  bool ranks_are_local = true;  // every rank runs on this host (their /proc is readable)
  // Else: ranks that registered with this host name are read here (empty: none).
  std::string this_host;
  std::string program = "hvrun";  // what the said lines start with
};

// Each message `say` gets is one or more whole lines, for the caller's stderr.
using SayLines = std::function<void(std::string_view)>;

// Returns the verdict it said.
std::string report_autopsy(const v1::AutopsyJobReport& collected, const AutopsyReporting& how,
                           const SayLines& say);

}  // namespace hvrun
