#include "coordinator/metrics/metrics_server.h"

#include <fcntl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>

#include "coordinator/metrics/exposition.h"
#include "coordinator/metrics/job_metrics.h"

namespace hvrun::coordinator::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A scraper that keeps a connection open between scrapes sends its next request within the
// scrape interval; an idle or stuck connection is dropped after this.
constexpr auto kIdleTimeout = std::chrono::seconds(120);
// More simultaneous connections than any set of scrapers needs: beyond it new ones are closed.
constexpr int kMaxConnections = 32;

using SharedRenderer = std::shared_ptr<const MetricsServer::Renderer>;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, SharedRenderer renderer, std::shared_ptr<std::atomic<int>> open)
      : stream_(std::move(socket)), renderer_(std::move(renderer)), open_(std::move(open)) {}
  ~Session() { open_->fetch_sub(1); }

  void read() {
    parser_.emplace();
    parser_->header_limit(kMaxRequestHeaderBytes);
    parser_->body_limit(kMaxRequestBodyBytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream) return close();
    if (ec == http::error::header_limit)
      return respond(http::status::request_header_fields_too_large, "request headers too large\n",
                     true);
    if (ec == http::error::body_limit)
      return respond(http::status::payload_too_large, "request body too large\n", true);
    if (ec && ec.category() == http::make_error_code(http::error::end_of_stream).category())
      return respond(http::status::bad_request, "malformed HTTP request\n", true);
    if (ec) return;  // closed by the peer, timed out, or the server stops: nothing to answer
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

  void respond(http::status status, std::string body, bool close_after,
               std::string_view content_type = "text/plain; charset=utf-8") {
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
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec || !self->response_.keep_alive()) return self->close();
                        self->read();
                      });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  // Holds one request at most (the parser's limits), with room for the next one's first bytes.
  beast::flat_buffer buffer_{2 * (kMaxRequestHeaderBytes + kMaxRequestBodyBytes)};
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  SharedRenderer renderer_;
  std::shared_ptr<std::atomic<int>> open_;
};

class BeastMetricsServer final : public MetricsServer {
 public:
  BeastMetricsServer(SharedRenderer renderer) : renderer_(std::move(renderer)) {}
  ~BeastMetricsServer() override { stop(); }

  Status listen(const MetricsServerOptions& options) {
    beast::error_code ec;
    std::string host = options.address == "localhost" ? "127.0.0.1" : options.address;
    const asio::ip::address address = asio::ip::make_address(host, ec);
    if (ec) {
      return invalid_argument("metrics: --metrics-address '" + options.address +
                              "' is not an IP address to listen on (e.g. 127.0.0.1, or 0.0.0.0 "
                              "for every interface)");
    }
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
    const std::string where =
        "metrics: cannot listen on " + options.address + ":" + std::to_string(options.port) + ": ";
    acceptor_.open(endpoint.protocol(), ec);
    // hvrun forks workers after this: they must not inherit the listening socket (asio opens it
    // without SOCK_CLOEXEC). Accepted sockets get SOCK_CLOEXEC from accept4 (see accept()).
    if (!ec && ::fcntl(acceptor_.native_handle(), F_SETFD, FD_CLOEXEC) != 0)
      ec = beast::error_code(errno, boost::system::system_category());
    if (!ec) acceptor_.non_blocking(true, ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return unavailable(where + ec.message() +
                         (ec == asio::error::address_in_use
                              ? " (choose another --metrics-port, or 0 for a free one)"
                              : ""));
    }
    const tcp::endpoint bound = acceptor_.local_endpoint(ec);
    if (ec) return internal_error(where + ec.message());
    protocol_ = bound.protocol();
    port_ = bound.port();
    host_ = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
    accept();
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "hvrun-metrics");
      io_.run();
    });
    return Status::ok();
  }

  int port() const override { return port_; }
  std::string url() const override {
    return "http://" + host_ + ":" + std::to_string(port_) + "/metrics";
  }

  void stop() override {
    if (!thread_.joinable()) return;
    // Pending reads/writes are abandoned with the io_context; their sessions are freed with it.
    asio::post(io_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    io_.stop();
    thread_.join();
  }

 private:
  // Waits for the listening socket to be readable, then accept4()s with SOCK_CLOEXEC: asio's
  // own accept leaves the descriptor inheritable by a worker forked at the same moment.
  void accept() {
    acceptor_.async_wait(tcp::acceptor::wait_read, [this](beast::error_code ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      for (;;) {
        const int fd =
            ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // none left
          // Out of descriptors (EMFILE, ENFILE, ...): the pending connection keeps the socket
          // readable, so waiting again at once would spin; retry a little later.
          spdlog::warn("metrics: accepting a connection failed: {}", std::strerror(errno));
          retry_timer_.expires_after(std::chrono::milliseconds(250));
          retry_timer_.async_wait([this](beast::error_code timer_error) {
            if (!timer_error) accept();
          });
          return;
        }
        if (open_->fetch_add(1) >= kMaxConnections) {
          open_->fetch_sub(1);
          ::close(fd);
          continue;
        }
        tcp::socket socket(io_);
        beast::error_code assign_error;
        socket.assign(protocol_, fd, assign_error);
        if (assign_error) {
          open_->fetch_sub(1);
          ::close(fd);
          continue;
        }
        std::make_shared<Session>(std::move(socket), renderer_, open_)->read();
      }
      accept();
    });
  }

  asio::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  asio::steady_timer retry_timer_{io_};
  SharedRenderer renderer_;
  std::shared_ptr<std::atomic<int>> open_ = std::make_shared<std::atomic<int>>(0);
  std::thread thread_;
  tcp protocol_ = tcp::v4();
  int port_ = 0;
  std::string host_;
};

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start_with_renderer(
    const MetricsServerOptions& options, Renderer renderer) {
  auto server =
      std::make_unique<BeastMetricsServer>(std::make_shared<const Renderer>(std::move(renderer)));
  HVRUN_RETURN_IF_ERROR(server->listen(options));
  return std::unique_ptr<MetricsServer>(std::move(server));
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsServerOptions& options,
                                                            Provider provider) {
  return start_with_renderer(
      options, [provider = std::move(provider)] { return render_metrics(provider()); });
}

}  // namespace hvrun::coordinator::metrics
