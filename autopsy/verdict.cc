#include "autopsy/verdict.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

namespace hvrun {
namespace {

constexpr int kVerdictFrames = 3;     // frames in the verdict's "it is in ..."
constexpr int kRingLines = 16;        // latest flight records in the text report
constexpr int kNativeFrameLines = 40;

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Objects whose frames say nothing about where the trainer is: the C and C++ runtimes, the
// loader, the interpreter, and hvrun's own library and bindings.
bool system_object(const std::string& object) {
  const std::string name = basename_of(object);
  for (const char* prefix : {"libc.so", "libc-", "libpthread", "libstdc++", "libgcc_s", "ld-linux",
                             "libm.so", "libdl.so", "libhvrun", "libpython", "python3", "_core.",
                             "libgomp", "libgrpc", "libprotobuf", "libabsl"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

// "f" for "(anonymous namespace)::f": the file already says where it is.
std::string without_anonymous_namespaces(std::string function) {
  static const std::string kAnonymous = "(anonymous namespace)::";
  for (size_t at = function.find(kAnonymous); at != std::string::npos; at = function.find(kAnonymous))
    function.erase(at, kAnonymous.size());
  return function;
}

// "libc.so.6+0x91f16" (the offset when known): what addr2line needs for a frame without a name.
std::string object_and_offset(const v1::AutopsyFrame& frame) {
  std::string text = basename_of(frame.object());
  if (frame.object_offset() == 0) return text;
  char offset[32];
  std::snprintf(offset, sizeof offset, "+0x%llx",
                static_cast<unsigned long long>(frame.object_offset()));
  return text + offset;
}

std::string frame_text(const v1::AutopsyFrame& frame) {
  const std::string function =
      without_anonymous_namespaces(function_without_parameters(frame.function()));
  if (!frame.file().empty() && frame.line() > 0)
    return basename_of(frame.file()) + ":" + std::to_string(frame.line()) +
           (function.empty() ? "" : " " + function);
  if (!function.empty()) return function + (frame.object().empty() ? "" : " (" + basename_of(frame.object()) + ")");
  char address[32];
  std::snprintf(address, sizeof address, "0x%llx", static_cast<unsigned long long>(frame.address()));
  return std::string(address) + (frame.object().empty() ? "" : " (" + object_and_offset(frame) + ")");
}

// Where a thread is, outermost first: its innermost Python frames, else its innermost native
// frames outside system objects (all frames when every one is a system object's).
std::string thread_location(const v1::AutopsyThread& thread) {
  std::vector<std::string> parts;
  if (thread.python_frames_size() > 0) {
    for (int i = 0; i < thread.python_frames_size() && i < kVerdictFrames; ++i)
      parts.push_back(frame_text(thread.python_frames(i)));
  } else {
    for (const v1::AutopsyFrame& frame : thread.native_frames()) {
      if (static_cast<int>(parts.size()) >= kVerdictFrames) break;
      if (frame.function().empty() || system_object(frame.object()) ||
          frame.file().rfind("/usr/include/", 0) == 0)  // inlined library code
        continue;
      parts.push_back(frame_text(frame));
    }
    for (int i = 0; parts.empty() && i < thread.native_frames_size() && i < kVerdictFrames; ++i)
      parts.push_back(frame_text(thread.native_frames(i)));
  }
  std::string text;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) text += (text.empty() ? "" : " -> ") + *it;
  return text;
}

std::string state_text(const std::string& letter, const std::string& syscall,
                       const std::string& wchan) {
  const char state = letter.empty() ? '?' : letter[0];
  const std::string in = !syscall.empty() ? syscall : wchan;
  switch (state) {
    case 'R': return "running";
    case 'S': return in.empty() ? "sleeping" : "sleeping in " + in;
    case 'D': return "in uninterruptible sleep" + (in.empty() ? "" : " in " + in);
    case 'T': return "stopped";
    case 't': return "stopped by a debugger";
    case 'Z': return "a zombie (exited, not reaped)";
    default: return in.empty() ? "state " + letter : "in " + in;
  }
}

// The thread that submits the rank's collectives: its latest submission's, else the main one.
const v1::AutopsyThread* training_thread(const v1::AutopsyReport& report) {
  int64_t tid = report.pid();
  uint64_t latest = 0;
  for (const v1::FlightRecord& record : report.ring())
    if (record.sequence() > latest && record.submitter_tid() > 0) {
      latest = record.sequence();
      tid = record.submitter_tid();
    }
  const v1::AutopsyThread* main_thread = nullptr;
  for (const v1::AutopsyThread& thread : report.threads()) {
    if (thread.tid() == tid) return &thread;
    if (thread.tid() == report.pid()) main_thread = &thread;
  }
  if (main_thread != nullptr) return main_thread;
  return report.threads_size() > 0 ? &report.threads(0) : nullptr;
}

// Waits shorter than this are collectives in progress, not a rank holding the others up: an
// autopsy asked of a job that runs (hvrun dump, SIGUSR1) finds some tensor waiting a few
// milliseconds for its last rank at almost any moment.
constexpr double kInProgressSeconds = 0.1;

const v1::AutopsyStall* longest_wait(const v1::AutopsyJobReport& report) {
  const v1::AutopsyStall* longest = nullptr;
  for (const v1::AutopsyStall& stall : report.stalls())
    if (!stall.missing_ranks().empty() &&
        (longest == nullptr || stall.waited_seconds() > longest->waited_seconds()))
      longest = &stall;
  return longest;
}

bool every_rank_answered(const v1::AutopsyJobReport& report) {
  for (const v1::AutopsyRankEntry& entry : report.ranks())
    if (!entry.answered()) return false;
  return true;
}

// The rank the others wait for; -1 when every rank answered and nothing waits longer than a
// collective in progress does.
int culprit(const v1::AutopsyJobReport& report) {
  if (every_rank_answered(report)) {
    const v1::AutopsyStall* longest = longest_wait(report);
    if (longest == nullptr || longest->waited_seconds() < kInProgressSeconds) return -1;
  }
  std::map<int, int> behind;  // rank -> stalled tensors it has not submitted
  for (const v1::AutopsyStall& stall : report.stalls())
    for (int r : stall.missing_ranks()) ++behind[r];
  int best = -1;
  int most = 0;
  // Ties go to the rank missing from the oldest stall (stalls are oldest first).
  for (const v1::AutopsyStall& stall : report.stalls())
    for (int r : stall.missing_ranks())
      if (behind[r] > most) {
        best = r;
        most = behind[r];
      }
  if (best >= 0) return best;
  for (const v1::AutopsyRankEntry& entry : report.ranks())
    if (!entry.answered()) return entry.rank();
  return -1;
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", s);
  return text;
}

void describe_thread(std::ostringstream& out, const v1::AutopsyThread& thread) {
  out << "    thread " << thread.tid() << " '" << thread.name() << "': "
      << state_text(thread.state(), thread.syscall(), thread.wchan());
  if (!thread.wchan().empty()) out << " (wchan " << thread.wchan() << ")";
  out << "\n";
  if (!thread.note().empty()) out << "      " << thread.note() << "\n";
  for (const v1::AutopsyFrame& frame : thread.python_frames())
    out << "      py  " << basename_of(frame.file()) << ":" << frame.line() << " "
        << frame.function() << "  (" << frame.file() << ")\n";
  int shown = 0;
  for (const v1::AutopsyFrame& frame : thread.native_frames()) {
    if (++shown > kNativeFrameLines) {
      out << "      ... " << thread.native_frames_size() - kNativeFrameLines << " more frames\n";
      break;
    }
    char address[32];
    std::snprintf(address, sizeof address, "0x%llx",
                  static_cast<unsigned long long>(frame.address()));
    out << "      #" << shown - 1 << " " << address << " "
        << (frame.function().empty() ? "??" : frame.function());
    if (!frame.file().empty()) out << " at " << frame.file() << ":" << frame.line();
    if (!frame.object().empty())
      out << " in " << (frame.function().empty() ? object_and_offset(frame)
                                                 : basename_of(frame.object()));
    out << "\n";
  }
}

void describe_record(std::ostringstream& out, const v1::FlightRecord& record) {
  out << "    #" << record.sequence() << " " << v1::CollectiveOp_Name(record.op()) << " '"
      << record.name() << "' " << record.bytes() << " bytes, set " << record.process_set_id()
      << ", " << record.state();
  if (!record.backend().empty()) out << " on " << record.backend();
  if (record.start_unix_us() > 0 && record.submit_unix_us() > 0)
    out << ", started " << (record.start_unix_us() - record.submit_unix_us()) << " us after submission";
  if (record.end_unix_us() > 0 && record.start_unix_us() > 0)
    out << ", ran " << (record.end_unix_us() - record.start_unix_us()) << " us";
  out << " (thread " << record.submitter_tid() << ")\n";
}

}  // namespace

std::string function_without_parameters(const std::string& function) {
  if (function.empty() || function.back() == '>') return function;
  // Strip trailing qualifiers (" const"), then the balanced parameter list.
  size_t end = function.size();
  while (end > 0 && function[end - 1] != ')') {
    if (function[end - 1] == ' ' || std::isalpha(static_cast<unsigned char>(function[end - 1])) ||
        function[end - 1] == '&')
      --end;
    else
      return function;
  }
  if (end == 0) return function;
  int depth = 0;
  for (size_t i = end; i-- > 0;) {
    if (function[i] == ')') ++depth;
    if (function[i] == '(' && --depth == 0) return i == 0 ? function : function.substr(0, i);
  }
  return function;
}

std::string autopsy_verdict(const v1::AutopsyJobReport& report) {
  const int rank = culprit(report);
  if (rank < 0 || rank >= report.ranks_size()) {
    const v1::AutopsyStall* longest = longest_wait(report);
    if (longest == nullptr)
      return "no rank is behind: every rank answered and no collective waits for a missing rank";
    std::string missing;
    for (int r : longest->missing_ranks())
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    char waited[32];
    std::snprintf(waited, sizeof waited, "%.3f", longest->waited_seconds());
    return "no rank is stuck: every rank answered and the longest wait, '" + longest->name() +
           "' for " + (longest->missing_ranks_size() == 1 ? "rank " : "ranks ") + missing +
           ", is " + waited + " s (collectives in progress)";
  }
  const v1::AutopsyRankEntry& entry = report.ranks(rank);
  std::string verdict = "rank " + std::to_string(rank) +
                        (entry.host().empty() ? "" : " on " + entry.host());
  if (entry.missing_tensors_size() > 0) {
    const int behind = entry.missing_tensors_size();
    verdict += " has not submitted '" + entry.missing_tensors(0) + "' (" + std::to_string(behind) +
               (behind == 1 ? " tensor" : " tensors") + " behind)";
  }
  if (entry.answered()) {
    const v1::AutopsyThread* thread = training_thread(entry.report());
    if (thread == nullptr) return verdict + "; it answered without any thread";
    const std::string where = thread_location(*thread);
    return verdict + "; it is in " + (where.empty() ? "an unknown place" : where) + " (" +
           state_text(thread->state(), thread->syscall(), thread->wchan()) + ")";
  }
  const v1::AutopsyProcessState& process = entry.process();
  verdict += "; it did not answer within " + seconds(report.deadline_seconds()) + " s";
  if (process.state() == "gone" || process.state() == "unknown")
    return verdict + " (" + process.note() + ")";
  verdict += ": its process (pid " + std::to_string(entry.pid()) + ") is " +
             (process.state_letter() == "T" || process.state_letter() == "t"
                  ? state_text(process.state_letter(), "", "")
                  : state_text(process.state_letter(), process.syscall(), process.wchan()));
  return verdict;
}

std::string autopsy_text(const v1::AutopsyJobReport& report) {
  std::ostringstream out;
  out << "hvrun autopsy of job " << report.job_id() << "\n"
      << "trigger: " << report.trigger() << "\n"
      << "verdict: " << (report.verdict().empty() ? autopsy_verdict(report) : report.verdict())
      << "\n\n";
  if (report.stalls_size() == 0) out << "no collective waits for a missing rank\n";
  for (const v1::AutopsyStall& stall : report.stalls()) {
    out << "waiting: " << v1::CollectiveOp_Name(stall.op()) << " '" << stall.name() << "' for "
        << seconds(stall.waited_seconds()) << " s, missing ranks";
    for (int r : stall.missing_ranks()) out << " " << r;
    out << " (set " << stall.process_set_id() << ")\n";
  }
  for (const v1::AutopsyRankEntry& entry : report.ranks()) {
    out << "\nrank " << entry.rank() << " on " << entry.host() << " (pid " << entry.pid() << "): "
        << (entry.answered() ? "answered" : "did not answer") << "\n";
    if (entry.missing_tensors_size() > 0) {
      out << "  has not submitted:";
      for (const std::string& name : entry.missing_tensors()) out << " '" << name << "'";
      out << "\n";
    }
    if (!entry.answered()) {
      const v1::AutopsyProcessState& p = entry.process();
      out << "  process: " << p.state();
      if (!p.syscall().empty()) out << " in " << p.syscall();
      if (!p.wchan().empty()) out << " (wchan " << p.wchan() << ")";
      if (!p.note().empty()) out << "; " << p.note();
      out << "\n";
      for (const v1::AutopsyThread& t : p.threads()) describe_thread(out, t);
      continue;
    }
    const v1::AutopsyReport& r = entry.report();
    if (!r.note().empty()) out << "  note: " << r.note() << "\n";
    if (r.recorder_capacity() == 0) out << "  flight recorder: off\n";
    out << "  waiting in " << r.waiting_size() << " collective(s)\n";
    for (const v1::FlightRecord& record : r.waiting()) describe_record(out, record);
    if (r.recorder_capacity() > 0) {
      out << "  flight recorder: " << r.recorded_total() << " collectives recorded, last "
          << std::min(r.ring_size(), kRingLines) << " of the ring of " << r.recorder_capacity()
          << ":\n";
      for (int i = std::max(0, r.ring_size() - kRingLines); i < r.ring_size(); ++i)
        describe_record(out, r.ring(i));
    }
    out << "  threads:\n";
    for (const v1::AutopsyThread& t : r.threads()) describe_thread(out, t);
  }
  return out.str();
}

}  // namespace hvrun
