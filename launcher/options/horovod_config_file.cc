#include "launcher/options/horovod_config_file.h"

#include <array>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

namespace hvrun::launcher {
namespace {

// One key Horovod's config_parser reads, and the horovodrun flag(s) it stands for: a value
// flag, or a switch's two spellings (true, false).
struct ConfigKey {
  std::string_view key;
  std::string_view value_flag;
  std::string_view true_flag = {};
  std::string_view false_flag = {};
};

constexpr std::array kKeys = {
    ConfigKey{"params.fusion_threshold_mb", "--fusion-threshold-mb"},
    ConfigKey{"params.cycle_time_ms", "--cycle-time-ms"},
    ConfigKey{"params.cache_capacity", "--cache-capacity"},
    ConfigKey{"params.hierarchical_allreduce", {}, "--hierarchical-allreduce",
              "--no-hierarchical-allreduce"},
    ConfigKey{"params.hierarchical_allgather", {}, "--hierarchical-allgather",
              "--no-hierarchical-allgather"},
    ConfigKey{"params.torus_allreduce", {}, "--torus-allreduce", "--no-torus-allreduce"},
    ConfigKey{"autotune.enabled", {}, "--autotune", "--no-autotune"},
    ConfigKey{"autotune.log_file", "--autotune-log-file"},
    ConfigKey{"autotune.warmup_samples", "--autotune-warmup-samples"},
    ConfigKey{"autotune.steps_per_sample", "--autotune-steps-per-sample"},
    ConfigKey{"autotune.bayes_opt_max_samples", "--autotune-bayes-opt-max-samples"},
    ConfigKey{"autotune.gaussian_process_noise", "--autotune-gaussian-process-noise"},
    ConfigKey{"timeline.filename", "--timeline-filename"},
    ConfigKey{"timeline.mark_cycles", {}, "--timeline-mark-cycles", "--no-timeline-mark-cycles"},
    ConfigKey{"stall_check.enabled", {}, "--stall-check", "--no-stall-check"},
    ConfigKey{"stall_check.warning_time_seconds", "--stall-check-warning-time-seconds"},
    ConfigKey{"stall_check.shutdown_time_seconds", "--stall-check-shutdown-time-seconds"},
    ConfigKey{"library_options.mpi_threads_disable", {}, "--mpi-threads-disable",
              "--no-mpi-threads-disable"},
    ConfigKey{"library_options.num_nccl_streams", "--num-nccl-streams"},
    ConfigKey{"library_options.thread_affinity", "--thread-affinity"},
    ConfigKey{"library_options.gloo_timeout_seconds", "--gloo-timeout-seconds"},
    ConfigKey{"logging.level", "--log-level"},
    ConfigKey{"logging.with_timestamp", {}, "--log-with-timestamp", "--log-without-timestamp"},
};

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A scalar as YAML reads it; nullopt for null (empty, '~', 'null'): Horovod leaves it unset.
struct Scalar {
  std::optional<std::string> text;
  bool quoted = false;
};

Result<Scalar> parse_scalar(std::string_view raw, const std::string& where) {
  const std::string v = trim(raw);
  if (v.empty() || v == "~" || lower(v) == "null") return Scalar{};
  const char q = v.front();
  if (q == '\'' || q == '"') {
    std::string out;
    size_t i = 1;
    for (; i < v.size(); ++i) {
      const char c = v[i];
      if (q == '\'' && c == '\'' && i + 1 < v.size() && v[i + 1] == '\'') {
        out += '\'';
        ++i;
      } else if (q == '"' && c == '\\' && i + 1 < v.size()) {
        const char e = v[++i];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else if (c == q) {
        break;
      } else {
        out += c;
      }
    }
    if (i >= v.size() || trim(std::string_view(v).substr(i + 1)) != "")
      return invalid_argument(where + ": unterminated or trailing text after the quoted value");
    return Scalar{out, true};
  }
  if (std::string_view("[{&*|>!%@`").find(q) != std::string_view::npos)
    return invalid_argument(where + ": '" + v +
                            "' is YAML hvrun's reader of Horovod's config file does not take (it "
                            "reads sections of 'key: value' lines with plain or quoted values)");
  return Scalar{v, false};
}

// "key: rest" -> key, rest; an error for anything else.
Result<std::pair<std::string, std::string>> split_key(const std::string& line,
                                                      const std::string& where) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos || (colon + 1 < line.size() && line[colon + 1] != ' '))
    return invalid_argument(where + ": expected 'key: value' or 'section:', got '" + trim(line) +
                            "'");
  std::string key = trim(std::string_view(line).substr(0, colon));
  if (key.empty() || key.starts_with("- "))
    return invalid_argument(where + ": expected 'key: value' (lists are not taken)");
  return std::make_pair(key, line.substr(colon + 1));
}

// Cuts a comment: '#' at the start or after a space, outside quotes.
std::string without_comment(const std::string& line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

Result<bool> parse_switch(const Scalar& s, const std::string& key, const std::string& where) {
  const std::string l = lower(*s.text);
  if (!s.quoted && (l == "true" || l == "yes" || l == "on")) return true;
  if (!s.quoted && (l == "false" || l == "no" || l == "off")) return false;
  return invalid_argument(where + ": " + key + ": expected true or false, got '" + *s.text + "'");
}

Status add_key(HorovodConfig& config, const std::string& key, const Scalar& value,
               const std::string& where) {
  if (!value.text) return Status::ok();  // null: Horovod leaves the option unset
  if (key == "controller") {
    const std::string l = lower(*value.text);
    if (l != "gloo" && l != "mpi")
      return invalid_argument(where + ": controller: no such controller '" + *value.text +
                              "' (Horovod takes gloo or mpi)");
    config.flags.push_back(
        ConfigFlag{l == "gloo" ? "--gloo" : "--mpi", std::nullopt, {"--gloo", "--mpi", "--jsrun"},
                   where});
    return Status::ok();
  }
  for (const ConfigKey& k : kKeys) {
    if (k.key != key) continue;
    if (!k.value_flag.empty()) {
      config.flags.push_back(ConfigFlag{std::string(k.value_flag), *value.text,
                                        {std::string(k.value_flag)}, where});
      return Status::ok();
    }
    HVRUN_ASSIGN_OR_RETURN(bool on, parse_switch(value, key, where));
    std::vector<std::string> same{std::string(k.true_flag), std::string(k.false_flag)};
    if (key == "logging.with_timestamp") {  // horovodrun's older spellings of the same option
      same.push_back("--log-hide-timestamp");
      same.push_back("--no-log-hide-timestamp");
    }
    config.flags.push_back(
        ConfigFlag{std::string(on ? k.true_flag : k.false_flag), std::nullopt, same, where});
    return Status::ok();
  }
  config.ignored_keys.push_back(where + ": " + key);
  return Status::ok();
}

}  // namespace

Result<HorovodConfig> parse_horovod_config(const std::string& text, const std::string& path) {
  HorovodConfig config;
  std::istringstream in(text);
  std::string line, section;
  std::set<std::string> seen;
  size_t section_indent = 0;
  int line_no = 0;
  bool started = false;  // a line other than blanks and comments was read
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no);
    line = without_comment(line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    const bool document_start = !started && trim(line) == "---";
    started = true;
    if (document_start) continue;
    if (line.find('\t') < line.find_first_not_of(" \t"))
      return invalid_argument(where + ": a tab in the indentation (YAML indents with spaces)");
    const size_t indent = line.find_first_not_of(' ');
    HVRUN_ASSIGN_OR_RETURN(auto kv, split_key(line, where));
    auto [key, rest] = kv;
    std::string full;
    if (indent == 0) {
      section.clear();
      if (trim(rest).empty()) {  // "section:" opens a mapping
        section = key;
        section_indent = 0;
        full = key;
        if (!seen.insert(full).second)
          return invalid_argument(where + ": section '" + key + "' appears twice");
        continue;
      }
      full = key;
    } else {
      if (section.empty())
        return invalid_argument(where + ": an indented line outside a section");
      if (section_indent == 0) section_indent = indent;
      if (indent != section_indent)
        return invalid_argument(where + ": indentation differs from the section's first key "
                                "(nested mappings are not taken)");
      if (trim(rest).empty())
        return invalid_argument(where + ": '" + key + ":' without a value (nested mappings are "
                                "not taken)");
      full = section + "." + key;
    }
    if (!seen.insert(full).second)
      return invalid_argument(where + ": '" + full + "' is given twice");
    HVRUN_ASSIGN_OR_RETURN(Scalar value, parse_scalar(rest, where));
    HVRUN_RETURN_IF_ERROR(add_key(config, full, value, where));
  }
  return config;
}

Result<HorovodConfig> read_horovod_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument("--config-file " + path + ": cannot be read");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_horovod_config(buf.str(), path);
}

}  // namespace hvrun::launcher
