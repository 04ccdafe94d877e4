// Where a running job writes its autopsy reports, found from its hvrun's pid alone.
//
// `hvrun dump PID` runs in another shell, with its own environment and working directory: it
// cannot re-derive the job's --autopsy-dir, --output-filename, HVRUN_AUTOPSY_DIR or TMPDIR. So
// the job's hvrun writes the directory it resolved (absolute) on a card named after its pid,
//
//     /dev/shm/hvrun-job-<pid>.autopsy-dir     "start_time <ticks>\nautopsy_dir <path>\n"
//
// and deletes it when it exits (its orphan guard does, when hvrun is killed). /dev/shm is on
// every Linux host, whatever TMPDIR says. A reader trusts a card only when its owner is the
// process's owner and its start time is the process's (a pid reused by another hvrun, a card
// left behind or written by someone else, are ignored).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace hvrun::launcher {

// The card of process `pid` (this host's shared-memory directory).
std::string report_directory_card_path(pid_t pid);

// This process's card, written when made and deleted when destroyed.
class ReportDirectoryCard {
 public:
  // Writes the card for `directory` (made absolute against the working directory). Nothing is
  // published when it cannot be written (`hvrun dump` then says so).
  explicit ReportDirectoryCard(const std::string& directory);
  ~ReportDirectoryCard();
  ReportDirectoryCard(const ReportDirectoryCard&) = delete;
  ReportDirectoryCard& operator=(const ReportDirectoryCard&) = delete;

  // The card's path; empty when none was written.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The autopsy directory process `pid` published, or nullopt (no card, or one not to trust).
std::optional<std::string> read_report_directory_card(pid_t pid);

}  // namespace hvrun::launcher
