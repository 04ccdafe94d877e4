// What hvrun does with a finished autopsy (the coordinator's kAutopsy event): adds the process
// state of ranks that did not answer (process_view.h), prints the verdict first (verdict.h),
// then writes the full report, JSON and text (report_files.h), and says where.
//
// Threads: the job supervisor's loop (posted there from the coordinator's event thread).
#pragma once

#include <memory>
#include <string>

#include "hvrun.pb.h"
#include "launcher/process/output_mux.h"

namespace hvrun::launcher {

struct AutopsyReporting {
  std::string directory;        // autopsy_directory(--autopsy-dir, --output-filename)
  bool ranks_are_local = true;  // every rank runs on this host (their /proc is readable)
  // Else: ranks that registered with this host name are read here (empty: none).
  std::string this_host;
  std::string program = "hvrun";  // what the printed lines start with
};

// Returns the verdict it printed.
std::string report_autopsy(const v1::AutopsyJobReport& collected, const AutopsyReporting& how,
                           OutputSink& err);

}  // namespace hvrun::launcher
