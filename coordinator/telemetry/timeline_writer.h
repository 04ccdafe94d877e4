// Writes a job's timeline as Chrome trace-event JSON (opens in chrome://tracing and
// https://ui.perfetto.dev), incrementally: one event per line, flushed regularly, so memory
// stays bounded whatever the job's length and a job killed mid-run leaves every flushed line.
//
// Layout of the file (timeline_reader.h reads it, tolerating a truncated tail):
//   [
//   {"name":"process_name","ph":"M","pid":0,...}
//   ,{"name":"collective","ph":"X","ts":...,"dur":...,"pid":0,"tid":3,"args":{...}}
//   ...
//   ]
// The closing bracket is written by close(); the trace-event format also accepts the array
// without it, which is what a SIGKILLed job leaves.
//
// pid = rank (the coordinator's own markers use pid = world size); tid = one lane per tensor
// or fused batch of that rank, named by a thread_name metadata event the first time it is used.
//
// Threads: not thread-safe; the aggregator serialises calls.
#pragma once

#include <cstdint>
#include <cstdio>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace hvrun::coordinator::telemetry {

using TimelineArgs = std::vector<std::pair<std::string, std::string>>;

class TimelineWriter {
 public:
  // Creates (truncates) `path`. Fails naming the path and the system's reason. With
  // `horovod_names`, phases are written under Horovod's names (horovod_event_names.h).
  static Result<std::unique_ptr<TimelineWriter>> open(const std::string& path,
                                                      bool horovod_names = false);
  ~TimelineWriter();  // close()
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // Names process `pid` (a rank, or the coordinator) and orders it by `sort_index`.
  void name_process(int pid, const std::string& name, int sort_index);
  bool process_named(int pid) const { return named_processes_.count(pid) > 0; }

  // A slice ("X") of `dur_us` microseconds, or an instant ("i") when dur_us < 0. `scope` for
  // instants: 't' (lane), 'p' (process), 'g' (global).
  void event(int pid, std::string_view lane, std::string_view name, int64_t ts_us, int64_t dur_us,
             const TimelineArgs& args, char scope = 't');

  // Flushes to the file when the last flush is older than the flush period (or `force`).
  void flush(bool force = false);
  // Writes the closing bracket and closes the file. Idempotent.
  void close();

  const std::string& path() const { return path_; }
  uint64_t events_written() const { return events_; }

 private:
  TimelineWriter(std::string path, std::FILE* file, bool horovod_names);
  int lane_id(int pid, std::string_view lane);
  void write_line(const std::string& json);

  std::string path_;
  std::FILE* file_;
  bool horovod_names_;
  std::vector<char> buffer_;  // stdio buffer: bounds what a crash can lose between flushes
  uint64_t events_ = 0;
  bool first_ = true;
  std::chrono::steady_clock::time_point last_flush_;
  std::map<int, bool> named_processes_;
  std::map<int, std::unordered_map<std::string, int>> lanes_;  // pid -> lane -> tid
};

// Appends a JSON string literal (quotes included) for `text` to `out`.
void append_json_string(std::string& out, std::string_view text);

// The timeline file of attempt `attempt` of a job restarted by hvrun --max-restarts: the name
// itself for attempt 0, then "trace.restart1.json" ("trace.json" + 1), "FILE.restart2", ...
std::string timeline_path_for_attempt(const std::string& path, int attempt);

}  // namespace hvrun::coordinator::telemetry
