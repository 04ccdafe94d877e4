#include "coordinator/metrics/exposition.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace hvrun::coordinator::metrics {
namespace {

bool name_char(char c, bool first, bool allow_colon) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const bool digit = c >= '0' && c <= '9';
  return letter || (allow_colon && c == ':') || (!first && digit);
}

bool valid_name(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, allow_colon)) return false;
  return true;
}

std::string_view type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kSummary: return "summary";
  }
  return "untyped";
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);  // shortest round trip
  assert(ec == std::errc());
  (void)ec;
  return std::string(buf, end);
}

bool valid_metric_name(std::string_view name) { return valid_name(name, true); }
bool valid_label_name(std::string_view name) { return valid_name(name, false); }

void ExpositionWriter::begin(const MetricFamily& family) {
  assert(valid_metric_name(family.name));
  // Prometheus' convention, which its tooling (promtool check metrics) enforces.
  assert(family.type != MetricType::kCounter || family.name.ends_with("_total"));
  current_ = family.name;
  out_ += "# HELP ";
  out_ += family.name;
  out_ += ' ';
  out_ += escape_help(family.help);
  out_ += "\n# TYPE ";
  out_ += family.name;
  out_ += ' ';
  out_ += type_name(family.type);
  out_ += '\n';
}

void ExpositionWriter::sample(const Labels& labels, double value, std::string_view suffix) {
  assert(!current_.empty());
  out_ += current_;
  out_ += suffix;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      assert(valid_label_name(labels[i].first) && !labels[i].first.starts_with("__"));
      if (i > 0) out_ += ',';
      out_ += labels[i].first;
      out_ += "=\"";
      out_ += escape_label_value(labels[i].second);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += format_value(value);
  out_ += '\n';
}

}  // namespace hvrun::coordinator::metrics
