#include "coordinator/telemetry/timeline_reader.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

namespace hvrun::coordinator::telemetry {
namespace {

constexpr size_t kWholeFileCheckLimit = 64 << 20;

std::string trim(const std::string& line) {
  size_t begin = line.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = line.find_last_not_of(" \t\r\n");
  return line.substr(begin, end - begin + 1);
}

bool parse_object(const std::string& text, google::protobuf::Struct& out) {
  out.Clear();
  return google::protobuf::util::JsonStringToMessage(text, &out).ok();
}

}  // namespace

Result<TimelineSummary> read_timeline(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("timeline: cannot open " + path);
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string content = whole.str();
  if (trim(content).empty() || trim(content)[0] != '[')
    return invalid_argument("timeline " + path +
                            ": not a trace-event JSON array (does not start with '[')");

  TimelineSummary summary;
  std::istringstream lines(content);
  std::string line;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) rows.push_back(line);
  const bool ends_with_newline = !content.empty() && content.back() == '\n';
  google::protobuf::Struct event;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string text = trim(rows[i]);
    if (text.empty() || text == "[") continue;
    if (text == "]") {
      summary.closed = true;
      continue;
    }
    if (summary.closed)
      return invalid_argument("timeline " + path + ": line " + std::to_string(i + 1) +
                              " follows the closing ']'");
    if (text[0] == ',') text = trim(text.substr(1));
    if (!text.empty() && text.back() == ',') text.pop_back();  // "{...}," style writers
    const bool last = i + 1 == rows.size();
    if (!parse_object(text, event)) {
      if (last) {
        summary.truncated_tail = true;  // killed while writing this line
        break;
      }
      return invalid_argument("timeline " + path + ": line " + std::to_string(i + 1) +
                              " is not a JSON object: " + text.substr(0, 120));
    }
    if (last && !ends_with_newline && !summary.closed) summary.truncated_tail = true;
    ++summary.events;
    const auto& fields = event.fields();
    auto name = fields.find("name");
    auto pid = fields.find("pid");
    auto ph = fields.find("ph");
    if (name == fields.end() || pid == fields.end() || ph == fields.end()) continue;
    const int process = static_cast<int>(pid->second.number_value());
    const std::string& kind = ph->second.string_value();
    if (kind == "M") {
      if (name->second.string_value() == "process_name") {
        auto args = fields.find("args");
        if (args != fields.end()) {
          const auto& a = args->second.struct_value().fields();
          if (auto n = a.find("name"); n != a.end())
            summary.process_names[process] = n->second.string_value();
        }
      }
      continue;
    }
    ++summary.phases[process][name->second.string_value()];
  }
  if (summary.closed && content.size() <= kWholeFileCheckLimit) {
    google::protobuf::ListValue all;
    summary.whole_file_json = google::protobuf::util::JsonStringToMessage(content, &all).ok();
  }
  return summary;
}

std::string describe_timeline(const TimelineSummary& s) {
  std::ostringstream out;
  out << s.events << " events; "
      << (s.closed ? (s.whole_file_json ? "closed, valid JSON" : "closed, but NOT valid JSON as a whole")
                   : "not closed (the job was killed or is still running)")
      << (s.truncated_tail ? "; a truncated last line was skipped" : "") << "\n";
  for (const auto& [pid, phases] : s.phases) {
    auto name = s.process_names.find(pid);
    out << "  " << (name != s.process_names.end() ? name->second : "pid " + std::to_string(pid))
        << ":";
    for (const auto& [phase, count] : phases) out << " " << phase << "=" << count;
    out << "\n";
  }
  return out.str();
}

}  // namespace hvrun::coordinator::telemetry

namespace hvrun::coordinator::telemetry {

int run_timeline_check(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const char* usage =
      "usage: hvrun timeline-check FILE [--require-ranks N] [--require-phases p1,p2,...]\n"
      "Reads a timeline written by hvrun --timeline-filename (a truncated tail, left by a job\n"
      "that was killed, is accepted) and prints its events per rank and phase.\n";
  std::string path;
  int ranks = 0;
  std::vector<std::string> phases;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      out << usage;
      return 0;
    }
    if ((args[i] == "--require-ranks" || args[i] == "--require-phases") && i + 1 < args.size()) {
      if (args[i] == "--require-ranks") {
        ranks = std::atoi(args[++i].c_str());
      } else {
        std::stringstream list(args[++i]);
        for (std::string p; std::getline(list, p, ',');)
          if (!p.empty()) phases.push_back(p);
      }
    } else if (path.empty() && !args[i].empty() && args[i][0] != '-') {
      path = args[i];
    } else {
      err << "hvrun timeline-check: unexpected argument '" << args[i] << "'\n" << usage;
      return 2;
    }
  }
  if (path.empty()) {
    err << usage;
    return 2;
  }
  auto summary = read_timeline(path);
  if (!summary.is_ok()) {
    err << "hvrun timeline-check: " << summary.status().message() << "\n";
    return 1;
  }
  out << describe_timeline(*summary);
  int missing = 0;
  for (int r = 0; r < ranks; ++r) {
    auto it = summary->phases.find(r);
    for (const std::string& phase : phases) {
      if (it == summary->phases.end() || !it->second.count(phase)) {
        err << "hvrun timeline-check: rank " << r << " has no '" << phase << "' event\n";
        ++missing;
      }
    }
  }
  return missing == 0 ? 0 : 1;
}

}  // namespace hvrun::coordinator::telemetry
