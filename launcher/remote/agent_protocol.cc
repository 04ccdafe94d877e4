#include "launcher/remote/agent_protocol.h"

#include <charconv>
#include <sstream>

namespace hvrun::launcher {

long long Frame::int_arg(size_t i, long long fallback) const {
  if (i >= args.size()) return fallback;
  long long v = 0;
  const std::string& a = args[i];
  auto [end, ec] = std::from_chars(a.data(), a.data() + a.size(), v);
  if (ec != std::errc() || end != a.data() + a.size()) return fallback;
  return v;
}

std::string encode_frame(std::string_view type, const std::vector<std::string>& args,
                         std::string_view payload) {
  std::string out(type);
  for (const std::string& a : args) {
    out += ' ';
    out += a;
  }
  out += ' ';
  out += std::to_string(payload.size());
  out += '\n';
  out.append(payload);
  return out;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += '\0';
    out += items[i];
  }
  return out;
}

std::vector<std::string> split_list(std::string_view payload) {
  std::vector<std::string> out;
  if (payload.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t zero = payload.find('\0', start);
    if (zero == std::string_view::npos) {
      out.emplace_back(payload.substr(start));
      return out;
    }
    out.emplace_back(payload.substr(start, zero - start));
    start = zero + 1;
  }
}

Result<std::optional<Frame>> FrameReader::next() {
  size_t newline = buffer_.find('\n');
  if (newline == std::string::npos) {
    if (buffer_.size() > kMaxHeader)
      return internal_error("agent protocol: no frame header in the first " +
                            std::to_string(kMaxHeader) + " bytes");
    return std::optional<Frame>();
  }
  std::istringstream words(buffer_.substr(0, newline));
  std::vector<std::string> parts;
  for (std::string w; words >> w;) parts.push_back(w);
  if (parts.size() < 2)
    return internal_error("agent protocol: malformed frame header '" + buffer_.substr(0, newline) +
                          "'");
  size_t length = 0;
  const std::string& len_text = parts.back();
  auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), length);
  if (ec != std::errc() || end != len_text.data() + len_text.size())
    return internal_error("agent protocol: bad payload length in '" + buffer_.substr(0, newline) +
                          "'");
  if (buffer_.size() < newline + 1 + length) return std::optional<Frame>();
  Frame frame;
  frame.type = parts.front();
  frame.args.assign(parts.begin() + 1, parts.end() - 1);
  frame.payload = buffer_.substr(newline + 1, length);
  buffer_.erase(0, newline + 1 + length);
  return std::optional<Frame>(std::move(frame));
}

}  // namespace hvrun::launcher
