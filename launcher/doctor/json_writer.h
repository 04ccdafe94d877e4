// A small JSON writer for the doctor's and the estimator's --json output: objects and arrays
// nest through begin/end calls, commas and string escaping are handled here. Output is one line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hvrun::json {

class Writer {
 public:
  Writer& begin_object(std::string_view key = {});
  Writer& end_object();
  Writer& begin_array(std::string_view key = {});
  Writer& end_array();
  Writer& value(std::string_view key, std::string_view text);
  Writer& value(std::string_view key, const char* text) { return value(key, std::string_view(text)); }
  Writer& value(std::string_view key, double number);
  Writer& value(std::string_view key, int64_t number);
  Writer& value(std::string_view key, int number) { return value(key, static_cast<int64_t>(number)); }
  Writer& value(std::string_view key, bool flag);
  Writer& null(std::string_view key);
  // Array elements (no key).
  Writer& element(std::string_view text);
  Writer& element(int64_t number);

  const std::string& str() const { return out_; }

 private:
  void key(std::string_view k);
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
};

std::string quote(std::string_view text);

}  // namespace hvrun::json
