#include "coordinator/metrics/scrape_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "coordinator/metrics/exposition.h"
#include "coordinator/metrics/metrics_server.h"

namespace hvrun::coordinator::metrics {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// What one read takes while waiting for a request to begin.
constexpr size_t kFirstReadBytes = 4096;

}  // namespace

bool SessionTable::make_room() {
  if (sessions_.size() < capacity_) return true;
  // Oldest first: an idle keep-alive connection costs a scraper nothing (it reconnects), one
  // still reading at least had its chance to send a request.
  for (const auto phase : {ScrapeSession::Phase::kIdle, ScrapeSession::Phase::kReading}) {
    auto oldest = std::find_if(sessions_.begin(), sessions_.end(),
                               [phase](const ScrapeSession* s) { return s->phase() == phase; });
    if (oldest != sessions_.end()) {
      (*oldest)->evict();
      return true;
    }
  }
  return false;
}

ScrapeSession::ScrapeSession(tcp::socket socket, SharedRenderer renderer, SessionTable& table,
                             const SessionLimits& limits)
    : stream_(std::move(socket)),
      buffer_(2 * (kMaxRequestHeaderBytes + kMaxRequestBodyBytes)),
      renderer_(std::move(renderer)),
      table_(&table),
      limits_(limits) {
  table_->add(this);
}

ScrapeSession::~ScrapeSession() { leave_table(); }

void ScrapeSession::leave_table() {
  if (table_ == nullptr) return;
  table_->remove(this);
  table_ = nullptr;
}

void ScrapeSession::evict() {
  leave_table();
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

void ScrapeSession::wait_for_request() {
  if (buffer_.size() > 0) return read_request();  // the next pipelined request is here already
  phase_ = Phase::kIdle;
  stream_.expires_after(limits_.idle_timeout);
  stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            if (ec) return;  // closed, idle too long, evicted, or stopping
                            self->buffer_.commit(n);
                            self->read_request();
                          });
}

void ScrapeSession::read_request() {
  phase_ = Phase::kReading;
  parser_.emplace();
  parser_->header_limit(kMaxRequestHeaderBytes);
  parser_->body_limit(kMaxRequestBodyBytes);
  stream_.expires_after(limits_.request_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
}

void ScrapeSession::on_read(beast::error_code ec) {
  if (ec == http::error::end_of_stream) return close();
  if (ec == http::error::header_limit)
    return respond(http::status::request_header_fields_too_large, "request headers too large\n",
                   true);
  if (ec == http::error::body_limit)
    return respond(http::status::payload_too_large, "request body too large\n", true);
  if (ec && ec.category() == http::make_error_code(http::error::end_of_stream).category())
    return respond(http::status::bad_request, "malformed HTTP request\n", true);
  if (ec) return;  // closed by the peer, too slow, evicted, or the server stops
  const auto& req = parser_->get();
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  std::string_view target(req.target().data(), req.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics")
    return respond(http::status::not_found, "not found: hvrun serves /metrics\n", false);
  if (req.method() != http::verb::get)
    return respond(http::status::method_not_allowed, "use GET\n", false);
  std::string body;
  try {
    body = (*renderer_)();
  } catch (const std::exception& e) {
    spdlog::warn("metrics: rendering /metrics failed: {}", e.what());
    return respond(http::status::internal_server_error,
                   std::string("rendering failed: ") + e.what() + "\n", false);
  }
  respond(http::status::ok, std::move(body), false, kExpositionContentType);
}

void ScrapeSession::respond(http::status status, std::string body, bool close_after,
                            std::string_view content_type) {
  phase_ = Phase::kAnswering;
  response_ = {};
  response_.result(status);
  response_.version(version_);
  response_.set(http::field::server, "hvrun");
  response_.set(http::field::content_type,
                beast::string_view(content_type.data(), content_type.size()));
  if (status == http::status::method_not_allowed) response_.set(http::field::allow, "GET");
  response_.body() = std::move(body);
  response_.keep_alive(keep_alive_ && !close_after);
  response_.prepare_payload();
  // A client that does not read its reply is cut off like one that does not send its request.
  stream_.expires_after(limits_.request_timeout);
  http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec || !self->response_.keep_alive()) return self->close();
    self->wait_for_request();
  });
}

void ScrapeSession::close() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

}  // namespace hvrun::coordinator::metrics
