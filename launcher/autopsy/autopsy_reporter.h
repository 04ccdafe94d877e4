// What hvrun does with a finished autopsy (autopsy/reporter.h), its lines on hvrun's stderr sink
// (so that they never split a rank's output line).
//
// Threads: the job supervisor's loop (posted there from the coordinator's event thread).
#pragma once

#include <string>
#include <string_view>

#include "autopsy/reporter.h"
#include "launcher/process/output_mux.h"

namespace hvrun::launcher {

// Returns the verdict it printed.
inline std::string report_autopsy(const v1::AutopsyJobReport& collected,
                                  const AutopsyReporting& how, OutputSink& err) {
  return hvrun::report_autopsy(collected, how,
                               [&err](std::string_view lines) { err.write_message(lines); });
}

}  // namespace hvrun::launcher
