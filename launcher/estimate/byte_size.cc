#include "launcher/estimate/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace hvrun::estimate {
namespace {

// Splits "24.5GiB" into 24.5 and "GiB"; false on a missing or malformed number.
bool split_number(std::string_view text, double* value, std::string* unit) {
  std::string s(text);
  size_t end = 0;
  while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.')) ++end;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + end, *value);
  if (end == 0 || ec != std::errc() || ptr != s.data() + end || !std::isfinite(*value)) return false;
  *unit = s.substr(end);
  while (!unit->empty() && unit->front() == ' ') unit->erase(0, 1);
  return true;
}

Status not_a_number(std::string_view text, std::string_view what) {
  return Status(StatusCode::kInvalidArgument, "'" + std::string(text) + "' is not a " +
                                                  std::string(what) + " (a number with an optional unit)");
}

}  // namespace

Result<double> parse_count(std::string_view text) {
  double number = 0;
  std::string unit;
  if (!split_number(text, &number, &unit)) return not_a_number(text, "count");
  double scale = 0;
  if (unit.empty()) scale = 1;
  else if (unit == "k" || unit == "K") scale = 1e3;
  else if (unit == "M" || unit == "m") scale = 1e6;
  else if (unit == "B" || unit == "G" || unit == "b" || unit == "g") scale = 1e9;
  else if (unit == "T" || unit == "t") scale = 1e12;
  else
    return Status(StatusCode::kInvalidArgument,
                  "'" + std::string(text) + "': unknown suffix '" + unit + "' (use k, M, B or T)");
  return number * scale;
}

Result<double> parse_bytes(std::string_view text) {
  double number = 0;
  std::string given;
  if (!split_number(text, &number, &given)) return not_a_number(text, "size");
  std::string unit = given;
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "k" || unit == "kb") scale = 1e3;
  else if (unit == "m" || unit == "mb") scale = 1e6;
  else if (unit == "g" || unit == "gb") scale = 1e9;
  else if (unit == "t" || unit == "tb") scale = 1e12;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return Status(StatusCode::kInvalidArgument,
                  "'" + std::string(text) + "': unknown unit '" + given +
                      "' (use B, KB, MB, GB, TB or KiB, MiB, GiB, TiB)");
  return number * scale;
}

std::string format_bytes(double bytes) {
  char buf[64];
  if (bytes >= 1e12) std::snprintf(buf, sizeof buf, "%.2f TB", bytes / 1e12);
  else if (bytes >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6) std::snprintf(buf, sizeof buf, "%.0f MB", bytes / 1e6);
  else if (bytes >= 1e3) std::snprintf(buf, sizeof buf, "%.0f KB", bytes / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::string format_count(double count) {
  char buf[64];
  if (count >= 1e9) std::snprintf(buf, sizeof buf, "%.2f B", count / 1e9);
  else if (count >= 1e6) std::snprintf(buf, sizeof buf, "%.1f M", count / 1e6);
  else if (count >= 1e3) std::snprintf(buf, sizeof buf, "%.1f k", count / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", count);
  return buf;
}

}  // namespace hvrun::estimate
