#include "coordinator/telemetry/timeline_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "coordinator/telemetry/horovod_event_names.h"

namespace hvrun::coordinator::telemetry {
namespace {
constexpr std::chrono::milliseconds kFlushPeriod{250};
constexpr size_t kFileBuffer = 256 << 10;
// Lanes per rank before further ones share one "other lanes" lane (bounds the lane tables for
// jobs that invent tensor names per step).
constexpr size_t kMaxLanesPerProcess = 20000;
}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string timeline_path_for_attempt(const std::string& path, int attempt) {
  if (attempt <= 0 || path.empty()) return path;
  const std::string suffix = ".restart" + std::to_string(attempt);
  std::filesystem::path p(path);
  if (p.has_extension() && p.stem() != "")
    return (p.parent_path() / (p.stem().string() + suffix + p.extension().string())).string();
  return path + suffix;
}

Result<std::unique_ptr<TimelineWriter>> TimelineWriter::open(const std::string& path,
                                                             bool horovod_names) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (!file)
    return failed_precondition("timeline: cannot create " + path + ": " + std::strerror(errno) +
                               " (check that the directory exists and is writable)");
  return std::unique_ptr<TimelineWriter>(new TimelineWriter(path, file, horovod_names));
}

TimelineWriter::TimelineWriter(std::string path, std::FILE* file, bool horovod_names)
    : path_(std::move(path)), file_(file), horovod_names_(horovod_names), buffer_(kFileBuffer),
      last_flush_(std::chrono::steady_clock::now()) {
  std::setvbuf(file_, buffer_.data(), _IOFBF, buffer_.size());
  std::fputs("[\n", file_);
}

TimelineWriter::~TimelineWriter() { close(); }

void TimelineWriter::write_line(const std::string& json) {
  if (!file_) return;
  if (!first_) std::fputc(',', file_);
  first_ = false;
  std::fwrite(json.data(), 1, json.size(), file_);
  std::fputc('\n', file_);
  ++events_;
}

void TimelineWriter::name_process(int pid, const std::string& name, int sort_index) {
  named_processes_[pid] = true;
  std::string line = R"({"name":"process_name","ph":"M","pid":)" + std::to_string(pid) +
                     R"(,"tid":0,"args":{"name":)";
  append_json_string(line, name);
  line += "}}";
  write_line(line);
  write_line(R"({"name":"process_sort_index","ph":"M","pid":)" + std::to_string(pid) +
             R"(,"tid":0,"args":{"sort_index":)" + std::to_string(sort_index) + "}}");
}

int TimelineWriter::lane_id(int pid, std::string_view lane) {
  auto& lanes = lanes_[pid];
  auto it = lanes.find(std::string(lane));
  if (it != lanes.end()) return it->second;
  std::string name(lane);
  if (lanes.size() >= kMaxLanesPerProcess) {
    name = "other lanes";
    if (auto other = lanes.find(name); other != lanes.end()) return other->second;
  }
  const int tid = static_cast<int>(lanes.size()) + 1;
  lanes.emplace(name, tid);
  std::string line = R"({"name":"thread_name","ph":"M","pid":)" + std::to_string(pid) +
                     R"(,"tid":)" + std::to_string(tid) + R"(,"args":{"name":)";
  append_json_string(line, name);
  line += "}}";
  write_line(line);
  return tid;
}

void TimelineWriter::event(int pid, std::string_view lane, std::string_view name, int64_t ts_us,
                           int64_t dur_us, const TimelineArgs& args, char scope) {
  if (!file_) return;
  const int tid = lane_id(pid, lane);
  std::string line = R"({"name":)";
  append_json_string(line, horovod_names_ ? horovod_event_name(name, args) : std::string(name));
  line += R"(,"cat":"hvrun","ph":)";
  line += dur_us < 0 ? R"("i")" : R"("X")";
  line += R"(,"ts":)" + std::to_string(ts_us);
  if (dur_us >= 0) line += R"(,"dur":)" + std::to_string(dur_us);
  else line += std::string(R"(,"s":")") + scope + '"';
  line += R"(,"pid":)" + std::to_string(pid) + R"(,"tid":)" + std::to_string(tid);
  if (!args.empty()) {
    line += R"(,"args":{)";
    bool first = true;
    for (const auto& [key, value] : args) {
      if (!first) line += ',';
      first = false;
      append_json_string(line, key);
      line += ':';
      append_json_string(line, value);
    }
    line += '}';
  }
  line += '}';
  write_line(line);
}

void TimelineWriter::flush(bool force) {
  if (!file_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_flush_ < kFlushPeriod) return;
  last_flush_ = now;
  std::fflush(file_);
}

void TimelineWriter::close() {
  if (!file_) return;
  std::fputs("]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace hvrun::coordinator::telemetry
