#include "launcher/supervisor/job_summary.h"

#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <iomanip>
#include <sstream>

namespace hvrun::launcher {

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    std::string text = "was killed by " + signal_name(WTERMSIG(wait_status));
    if (WCOREDUMP(wait_status)) text += " (core dumped)";
    return text;
  }
  return "ended with wait status " + std::to_string(wait_status);
}

void print_summary(OutputSink& err, const JobEnd& end, const std::vector<WorkerRecord>& workers) {
  std::ostringstream out;
  out << "hvrun: job failed: " << end.message << "\n";
  const bool names_cause = end.kind != JobEndKind::kSignal;
  const std::string after = names_cause && end.rank >= 0
                                ? " (after rank " + std::to_string(end.rank) + "'s failure)"
                                : " (after the job failed)";
  if (!workers.empty())  // none: the job ended before its ranks were placed
    out << "hvrun: " << std::left << std::setw(6) << "rank" << std::setw(16) << "host"
        << std::setw(9) << "pid" << "status\n";
  for (const WorkerRecord& w : workers) {
    out << "hvrun: " << std::left << std::setw(6) << w.rank << std::setw(16) << w.host
        << std::setw(9) << (w.pid > 0 ? std::to_string(w.pid) : "-");
    if (w.pid <= 0) {
      out << "not started";
    } else if (!w.exited && !w.lost.empty()) {
      out << w.lost;
    } else if (!w.exited) {
      out << "still running";
    } else {
      out << describe_wait_status(w.wait_status);
      if (w.signalled_by_hvrun) out << " (stopped by hvrun)";
      // A failure that followed the cause is its consequence, not a second cause.
      else if (names_cause && end.rank != w.rank && w.wait_status != 0) out << after;
    }
    if (end.rank == w.rank && names_cause) out << "  <- " <<
        (end.kind == JobEndKind::kWorkerFailed ? "first failure" : "named by the coordinator");
    out << "\n";
  }
  if (end.rank >= 0 && static_cast<size_t>(end.rank) < workers.size()) {
    const WorkerRecord& w = workers[static_cast<size_t>(end.rank)];
    if (w.err_stream != nullptr && !w.err_stream->last_lines().empty()) {
      out << "hvrun: last lines of rank " << w.rank << "'s stderr:\n";
      for (const std::string& line : w.err_stream->last_lines())
        out << "hvrun:   " << line << "\n";
    } else {
      out << "hvrun: rank " << end.rank << " wrote nothing to stderr\n";
    }
  }
  out << "hvrun: exit code " << end.exit_code << "\n";
  err.write_message(out.str());
}

}  // namespace hvrun::launcher
