// Tensor names: what every binding accepts (hvrun.h, validate_tensor_name).
#include <cstdio>
#include <string>
#include <string_view>

#include "hvrun/hvrun.h"

namespace hvrun {
namespace {

// Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 when it is not one.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return n;
}

std::string hex_byte(unsigned char b) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", b);
  return text;
}

}  // namespace

std::string escaped_tensor_name(std::string_view name) {
  constexpr size_t kShown = 200;  // a name is an identifier; a megabyte of it helps nobody
  std::string out = "\"";
  for (size_t i = 0; i < name.size() && i < kShown; ++i) {
    const auto b = static_cast<unsigned char>(name[i]);
    if (b == '"' || b == '\\') {
      out += '\\';
      out += static_cast<char>(b);
    } else if (b >= 0x20 && b < 0x7F) {
      out += static_cast<char>(b);
    } else {
      char text[8];
      std::snprintf(text, sizeof text, "\\x%02x", b);
      out += text;
    }
  }
  out += '"';
  if (name.size() > kShown) out += " (" + std::to_string(name.size()) + " bytes, first " +
                                   std::to_string(kShown) + " shown)";
  return out;
}

Status validate_tensor_name(std::string_view name) {
  constexpr const char* kRule =
      "; tensor names must be non-empty UTF-8 text without NUL characters";
  if (name.empty()) return invalid_argument(std::string("empty tensor name") + kRule);
  for (size_t i = 0; i < name.size();) {
    if (name[i] == '\0')
      return invalid_argument("tensor name " + escaped_tensor_name(name) +
                              " contains a NUL character at byte " + std::to_string(i) + kRule);
    const size_t n = utf8_sequence_length(name, i);
    if (n == 0)
      return invalid_argument("tensor name " + escaped_tensor_name(name) +
                              " is not valid UTF-8 (byte " +
                              hex_byte(static_cast<unsigned char>(name[i])) + " at offset " +
                              std::to_string(i) + ")" + kRule);
    i += n;
  }
  return Status::ok();
}

}  // namespace hvrun
