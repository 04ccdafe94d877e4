// One client connection of the /metrics server, and the table of open connections that keeps
// idle or slow clients from ever denying a scrape.
//
// A connection is in one of three phases: idle (waiting for the first byte of a request, bounded
// by the idle timeout), reading (the request has begun; the whole of it must arrive within the
// request timeout, so a client trickling its header cannot hold the connection) and answering
// (rendering and writing the reply, bounded by the request timeout too). When the table is full,
// a new connection evicts the oldest idle one, else the oldest still reading; a connection being
// answered is never evicted, so only as many scrapes as the cap answered at once can refuse one.
//
// Threads: everything here runs on the metrics server's one io thread.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace hvrun::coordinator::metrics {

struct SessionLimits {
  std::chrono::milliseconds idle_timeout;
  std::chrono::milliseconds request_timeout;
  size_t max_connections;
};

using SharedRenderer = std::shared_ptr<const std::function<std::string()>>;

class ScrapeSession;

// The open connections, oldest first. Must outlive every session it admitted.
class SessionTable {
 public:
  explicit SessionTable(size_t capacity) : capacity_(capacity) {}
  // Frees a place for one more connection, evicting one when full. False: every connection is
  // being answered; the new one should be refused.
  bool make_room();
  size_t size() const { return sessions_.size(); }

 private:
  friend class ScrapeSession;
  void add(ScrapeSession* session) { sessions_.push_back(session); }
  void remove(ScrapeSession* session) { sessions_.remove(session); }

  size_t capacity_;
  std::list<ScrapeSession*> sessions_;
};

class ScrapeSession : public std::enable_shared_from_this<ScrapeSession> {
 public:
  enum class Phase { kIdle, kReading, kAnswering };

  // Joins `table` (the caller made room first).
  ScrapeSession(boost::asio::ip::tcp::socket socket, SharedRenderer renderer, SessionTable& table,
                const SessionLimits& limits);
  ~ScrapeSession();

  void start() { wait_for_request(); }
  Phase phase() const { return phase_; }
  // Leaves the table at once and closes the socket; the pending operation ends the session.
  void evict();

 private:
  void wait_for_request();
  void read_request();
  void on_read(boost::beast::error_code ec);
  void respond(boost::beast::http::status status, std::string body, bool close_after,
               std::string_view content_type = "text/plain; charset=utf-8");
  void close();
  void leave_table();

  boost::beast::tcp_stream stream_;
  // Holds one request at most (the parser's limits), with room for the next one's first bytes.
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  boost::beast::http::response<boost::beast::http::string_body> response_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  Phase phase_ = Phase::kIdle;
  SharedRenderer renderer_;
  SessionTable* table_;  // null once evicted or gone
  const SessionLimits limits_;
};

}  // namespace hvrun::coordinator::metrics
