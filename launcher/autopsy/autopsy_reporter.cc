#include "launcher/autopsy/autopsy_reporter.h"

#include "launcher/autopsy/process_view.h"
#include "launcher/autopsy/report_files.h"
#include "launcher/autopsy/verdict.h"

namespace hvrun::launcher {

std::string report_autopsy(const v1::AutopsyJobReport& collected, const AutopsyReporting& how,
                           OutputSink& err) {
  v1::AutopsyJobReport report = collected;
  add_process_views(report, how.ranks_are_local, how.this_host);
  report.set_verdict(autopsy_verdict(report));
  const std::string head = how.program + ": autopsy";
  err.write_message(head + ": " + report.verdict() + "\n");
  auto files = write_autopsy_files(report, how.directory);
  if (!files.is_ok()) {
    err.write_message(head + ": " + files.status().message() + "\n");
  } else {
    err.write_message(head + " (" + report.trigger() + "): full report in " + files->text +
                      " and " + files->json + "\n");
  }
  return report.verdict();
}

}  // namespace hvrun::launcher
