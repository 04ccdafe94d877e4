// Reads a timeline written by TimelineWriter (or any Chrome trace-event JSON array written one
// event per line): counts events per process (rank) and name (phase), and says whether the file
// was closed properly. A truncated tail (a job SIGKILLed mid-write) is tolerated: the last,
// partial line is skipped and reported; a malformed line elsewhere is an error naming it.
// Used by `hvrun timeline-check FILE` and by the tests.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun::coordinator::telemetry {

struct TimelineSummary {
  bool closed = false;          // the closing "]" is there (the job ended by a path hvrun saw)
  bool whole_file_json = false; // closed, and the whole file parses as one JSON array
  bool truncated_tail = false;  // an unfinished last line was skipped
  uint64_t events = 0;          // every event, metadata included
  // pid -> event name -> count, for slices and instants ("collective", "negotiated", ...).
  std::map<int, std::map<std::string, uint64_t>> phases;
  std::map<int, std::string> process_names;  // pid -> "rank 0 (host a)", "coordinator"
};

Result<TimelineSummary> read_timeline(const std::string& path);

// Human-readable report: one line per process with its phases and counts.
std::string describe_timeline(const TimelineSummary& summary);

}  // namespace hvrun::coordinator::telemetry

namespace hvrun::coordinator::telemetry {

// `hvrun timeline-check FILE [--require-ranks N] [--require-phases p1,p2,...]`: prints
// describe_timeline(); exits 0 when the file is readable (a truncated tail is fine) and every
// required rank has every required phase, 1 otherwise, 2 on bad usage.
int run_timeline_check(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace hvrun::coordinator::telemetry
