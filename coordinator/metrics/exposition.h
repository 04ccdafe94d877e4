// Prometheus text exposition format, version 0.0.4 (what every Prometheus server scrapes):
//
//   # HELP hvrun_collective_bytes_total Payload bytes ...
//   # TYPE hvrun_collective_bytes_total counter
//   hvrun_collective_bytes_total{rank="0",host="a",op="allreduce",backend="shm"} 1048576
//
// One family (HELP + TYPE + its samples) at a time, every family once. Names and label names are
// checked against the format's grammar in debug builds; label values and help text are escaped.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hvrun::coordinator::metrics {

// A summary's samples: one per quantile (label `quantile`), then NAME_sum and NAME_count.
enum class MetricType { kCounter, kGauge, kSummary };

// One series family hvrun exports. Counters' names end in _total; values are in base units
// (seconds, bytes).
struct MetricFamily {
  std::string_view name;
  MetricType type;
  std::string_view help;
};

using Labels = std::vector<std::pair<std::string_view, std::string>>;

// The HTTP Content-Type of this format.
inline constexpr std::string_view kExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// `\` -> `\\`, `"` -> `\"`, newline -> `\n` (label values).
std::string escape_label_value(std::string_view value);
// `\` -> `\\`, newline -> `\n` (HELP text).
std::string escape_help(std::string_view help);
// Shortest text that reads back as the same double; NaN, +Inf, -Inf as Prometheus spells them.
std::string format_value(double value);
// [a-zA-Z_:][a-zA-Z0-9_:]* (metric names) / [a-zA-Z_][a-zA-Z0-9_]* (label names).
bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);

class ExpositionWriter {
 public:
  // Starts a family: its HELP and TYPE lines.
  void begin(const MetricFamily& family);
  // A sample of the family begun last; `suffix` follows its name (a summary's "_sum", "_count").
  void sample(const Labels& labels, double value, std::string_view suffix = {});

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  std::string_view current_;
};

}  // namespace hvrun::coordinator::metrics
