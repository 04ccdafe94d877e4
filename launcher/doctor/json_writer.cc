#include "launcher/doctor/json_writer.h"

#include <cmath>
#include <cstdio>

namespace hvrun::json {

std::string quote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void Writer::key(std::string_view k) {
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
  if (!k.empty()) out_ += quote(k) + ":";
}

Writer& Writer::begin_object(std::string_view k) {
  key(k);
  out_ += '{';
  first_.push_back(true);
  return *this;
}
Writer& Writer::end_object() {
  out_ += '}';
  first_.pop_back();
  return *this;
}
Writer& Writer::begin_array(std::string_view k) {
  key(k);
  out_ += '[';
  first_.push_back(true);
  return *this;
}
Writer& Writer::end_array() {
  out_ += ']';
  first_.pop_back();
  return *this;
}
Writer& Writer::value(std::string_view k, std::string_view text) {
  key(k);
  out_ += quote(text);
  return *this;
}
Writer& Writer::value(std::string_view k, double number) {
  key(k);
  if (!std::isfinite(number)) {
    out_ += "null";
    return *this;
  }
  char buf[64];
  if (number == std::floor(number) && std::fabs(number) < 9e15)
    std::snprintf(buf, sizeof buf, "%.0f", number);
  else
    std::snprintf(buf, sizeof buf, "%.15g", number);
  out_ += buf;
  return *this;
}
Writer& Writer::value(std::string_view k, int64_t number) {
  key(k);
  out_ += std::to_string(number);
  return *this;
}
Writer& Writer::value(std::string_view k, bool flag) {
  key(k);
  out_ += flag ? "true" : "false";
  return *this;
}
Writer& Writer::null(std::string_view k) {
  key(k);
  out_ += "null";
  return *this;
}
Writer& Writer::element(std::string_view text) { return value({}, text); }
Writer& Writer::element(int64_t number) { return value({}, number); }

}  // namespace hvrun::json
