#include "coordinator/metrics/metrics_server.h"

#include <fcntl.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
#include "coordinator/metrics/scrape_session.h"

namespace hvrun::coordinator::metrics {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class BeastMetricsServer final : public MetricsServer {
 public:
  BeastMetricsServer(SharedRenderer renderer, const MetricsServerOptions& options)
      : sessions_(static_cast<size_t>(std::max(1, options.max_connections))),
        limits_{options.idle_timeout, options.request_timeout,
                static_cast<size_t>(std::max(1, options.max_connections))},
        renderer_(std::move(renderer)) {}
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
        if (!sessions_.make_room()) {  // every connection is being answered right now
          ::close(fd);
          continue;
        }
        tcp::socket socket(io_);
        beast::error_code assign_error;
        socket.assign(protocol_, fd, assign_error);
        if (assign_error) {
          ::close(fd);
          continue;
        }
        std::make_shared<ScrapeSession>(std::move(socket), renderer_, sessions_, limits_)->start();
      }
      accept();
    });
  }

  // Before io_: the sessions still pending when the io_context goes leave it as they are freed.
  SessionTable sessions_;
  const SessionLimits limits_;
  asio::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  asio::steady_timer retry_timer_{io_};
  SharedRenderer renderer_;
  std::thread thread_;
  tcp protocol_ = tcp::v4();
  int port_ = 0;
  std::string host_;
};

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start_with_renderer(
    const MetricsServerOptions& options, Renderer renderer) {
  auto server = std::make_unique<BeastMetricsServer>(
      std::make_shared<const Renderer>(std::move(renderer)), options);
  HVRUN_RETURN_IF_ERROR(server->listen(options));
  return std::unique_ptr<MetricsServer>(std::move(server));
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsServerOptions& options,
                                                            Provider provider) {
  return start_with_renderer(
      options, [provider = std::move(provider)] { return render_metrics(provider()); });
}

}  // namespace hvrun::coordinator::metrics
