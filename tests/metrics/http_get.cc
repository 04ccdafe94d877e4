#include "tests/metrics/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace hvrun::test {

std::optional<HttpReply> parse_http_reply(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.rfind("HTTP/1.", 0) != 0) return std::nullopt;
  HttpReply reply;
  reply.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  reply.headers = raw.substr(0, end + 2);
  reply.body = raw.substr(end + 4);
  std::string lower;
  for (char c : reply.headers)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (size_t at = lower.find("content-length:"); at != std::string::npos) {
    const size_t length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
    if (reply.body.size() < length) return std::nullopt;
    reply.body.resize(length);
  }
  return reply;
}

namespace {

// `stop_early`: stop reading once a complete keep-alive reply is in (else read until close).
std::string exchange(int port, const std::string& request, std::chrono::milliseconds timeout,
                     bool stop_early) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (431) and close before reading it all
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
    // A keep-alive reply is complete once Content-Length bytes arrived.
    if (!stop_early) continue;
    if (auto reply = parse_http_reply(raw);
        reply && reply->headers.find("onnection: close") == std::string::npos)
      break;
  }
  ::close(fd);
  return raw;
}

}  // namespace

std::optional<HttpReply> http_exchange(int port, const std::string& request,
                                       std::chrono::milliseconds timeout) {
  return parse_http_reply(exchange(port, request, timeout, true));
}

std::string http_raw_exchange(int port, const std::string& request,
                              std::chrono::milliseconds timeout) {
  return exchange(port, request, timeout, false);
}

std::optional<HttpReply> http_get(int port, const std::string& target,
                                  std::chrono::milliseconds timeout) {
  return http_exchange(
      port, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", timeout);
}

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::string url_encode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace hvrun::test
