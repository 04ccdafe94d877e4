// A minimal blocking HTTP/1.1 client for the metrics tests (loopback only, every call bounded).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace hvrun::test {

struct HttpReply {
  int status = 0;
  std::string headers;  // the raw header block
  std::string body;
};

// Sends `request` (a whole request, ending in a blank line) to 127.0.0.1:port and reads the
// reply until the server closes the connection or `timeout` passes. nullopt: no connection, or
// no complete reply in time.
std::optional<HttpReply> http_exchange(int port, const std::string& request,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Sends `request` and returns every byte the server sends until it closes (or `timeout`).
std::string http_raw_exchange(int port, const std::string& request,
                              std::chrono::milliseconds timeout = std::chrono::seconds(5));

// GET `target` with "Connection: close".
std::optional<HttpReply> http_get(int port, const std::string& target,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(5));

// Parses "HTTP/1.1 200 OK\r\n...\r\n\r\nbody" (Content-Length honoured when present).
std::optional<HttpReply> parse_http_reply(const std::string& raw);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to 0, read, close).
int free_loopback_port();

// "%XX"-escapes a URL query value.
std::string url_encode(const std::string& text);

}  // namespace hvrun::test
