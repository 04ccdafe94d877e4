#include "autopsy/reporter.h"

#include "autopsy/process_view.h"
#include "autopsy/report_files.h"
#include "autopsy/verdict.h"

namespace hvrun {

std::string report_autopsy(const v1::AutopsyJobReport& collected, const AutopsyReporting& how,
                           const SayLines& say) {
  v1::AutopsyJobReport report = collected;
  add_process_views(report, how.ranks_are_local, how.this_host);
  report.set_verdict(autopsy_verdict(report));
  const std::string head = how.program + ": autopsy";
  say(head + ": " + report.verdict() + "\n");
  auto files = write_autopsy_files(report, how.directory);
  if (!files.is_ok()) {
    say(head + ": " + files.status().message() + "\n");
  } else {
    say(head + " (" + report.trigger() + "): full report in " + files->text + " and " +
        files->json + "\n");
  }
  return report.verdict();
}

}  // namespace hvrun
