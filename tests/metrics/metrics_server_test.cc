// The /metrics HTTP server on a real socket (127.0.0.1, port 0).
#include "coordinator/metrics/metrics_server.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "tests/metrics/http_get.h"
#include "tests/metrics/sample_telemetry.h"

namespace hvrun::coordinator::metrics {
namespace {

using test::http_exchange;
using test::http_get;

std::unique_ptr<MetricsServer> start_sample_server() {
  auto server =
      MetricsServer::start({"127.0.0.1", 0}, [] { return test::full_sample_telemetry(); });
  EXPECT_TRUE(server.is_ok()) << server.status().message();
  return server.is_ok() ? std::move(server).value() : nullptr;
}

// A client connection that sends nothing unless told to; closed with the object.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Whether the server closed the connection within `timeout` (reading and dropping whatever
  // it sent before).
  bool closed_by_server_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;  // EOF or reset
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

TEST(MetricsServer, IdleAndSlowConnectionsNeverDenyAScrape) {
  auto server = start_sample_server();
  ASSERT_TRUE(server);
  // More than the cap: half send nothing, half a request's first bytes and nothing more.
  std::vector<std::unique_ptr<RawConnection>> hogs;
  for (int i = 0; i < 48; ++i) {
    hogs.push_back(std::make_unique<RawConnection>(server->port()));
    ASSERT_TRUE(hogs.back()->connected()) << i;
    if (i % 2 == 1) {
      ASSERT_TRUE(hogs.back()->send("GET /metr"));
    }
  }
  const auto started = std::chrono::steady_clock::now();
  for (int scrape = 0; scrape < 3; ++scrape) {
    auto reply = http_get(server->port(), "/metrics", std::chrono::seconds(2));
    ASSERT_TRUE(reply) << "scrape " << scrape << " got no reply";
    EXPECT_EQ(reply->status, 200);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  // The oldest were evicted to make room.
  EXPECT_TRUE(hogs.front()->closed_by_server_within(std::chrono::seconds(2)));
}

TEST(MetricsServer, IdleConnectionsAreClosedWithinSeconds) {
  auto server = start_sample_server();  // the default timeouts
  ASSERT_TRUE(server);
  RawConnection idle(server->port());
  ASSERT_TRUE(idle.connected());
  EXPECT_TRUE(idle.closed_by_server_within(std::chrono::seconds(10)));
}

TEST(MetricsServer, ARequestTrickledSlowerThanTheRequestTimeoutIsCutOff) {
  MetricsServerOptions options;
  options.idle_timeout = std::chrono::seconds(30);
  options.request_timeout = std::chrono::milliseconds(300);
  auto server = MetricsServer::start(options, [] { return telemetry::JobTelemetry{}; });
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  RawConnection slow((*server)->port());
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.send("GET /metrics HTTP/1.1\r\nHo"));
  EXPECT_TRUE(slow.closed_by_server_within(std::chrono::seconds(5)));
  // A keep-alive connection that went quiet after a reply is idle again: the idle timeout
  // (30 s here) applies, not the request timeout.
  RawConnection kept((*server)->port());
  ASSERT_TRUE(kept.connected());
  ASSERT_TRUE(kept.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(kept.closed_by_server_within(std::chrono::seconds(1)));
}

TEST(MetricsServer, ServesMetricsWithTheExpositionContentType) {
  auto server = start_sample_server();
  ASSERT_TRUE(server);
  ASSERT_GT(server->port(), 0);
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()) + "/metrics");
  auto reply = http_get(server->port(), "/metrics");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200) << reply->headers;
  EXPECT_NE(reply->headers.find("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
            std::string::npos)
      << reply->headers;
  EXPECT_NE(reply->body.find("hvrun_collective_bytes_total{rank=\"1\""), std::string::npos)
      << reply->body;
  // A query string is ignored.
  auto with_query = http_get(server->port(), "/metrics?name[]=x");
  ASSERT_TRUE(with_query);
  EXPECT_EQ(with_query->status, 200);
}

TEST(MetricsServer, RendersFreshAtEveryScrape) {
  std::atomic<int> calls{0};
  auto server = MetricsServer::start({"127.0.0.1", 0}, [&calls] {
    telemetry::JobTelemetry job;
    job.ranks_alive = ++calls;
    return job;
  });
  ASSERT_TRUE(server.is_ok()) << server.status().message();
  auto first = http_get((*server)->port(), "/metrics");
  auto second = http_get((*server)->port(), "/metrics");
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->body.find("\nhvrun_ranks_alive 1\n"), std::string::npos);
  EXPECT_NE(second->body.find("\nhvrun_ranks_alive 2\n"), std::string::npos);
}

TEST(MetricsServer, OtherPathsAre404AndOtherMethods405) {
  auto server = start_sample_server();
  ASSERT_TRUE(server);
  for (const char* target : {"/", "/metricsx", "/favicon.ico", "/api/v1/query"}) {
    auto reply = http_get(server->port(), target);
    ASSERT_TRUE(reply) << target;
    EXPECT_EQ(reply->status, 404) << target;
  }
  auto post = http_exchange(server->port(),
                            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                            "Connection: close\r\n\r\nab");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_NE(post->headers.find("Allow: GET"), std::string::npos) << post->headers;
}

TEST(MetricsServer, KeepsAConnectionAliveAcrossScrapes) {
  auto server = start_sample_server();
  ASSERT_TRUE(server);
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  // Two pipelined requests on one connection, then one with close: three replies, in order.
  const std::string raw = test::http_raw_exchange(
      server->port(), get + get + "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const size_t first = raw.find("HTTP/1.1 200 OK");
  const size_t second = raw.find("HTTP/1.1 200 OK", first + 1);
  const size_t third = raw.find("HTTP/1.1 404 Not Found", second + 1);
  EXPECT_EQ(first, 0u) << raw.substr(0, 300);
  EXPECT_NE(second, std::string::npos);
  EXPECT_NE(third, std::string::npos);
  // The first reply kept the connection open.
  auto reply = test::parse_http_reply(raw.substr(0, second));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->headers.find("Connection: close"), std::string::npos) << reply->headers;
}

TEST(MetricsServer, OversizedOrMalformedRequestsAreRefused) {
  auto server = start_sample_server();
  ASSERT_TRUE(server);
  const std::string huge_header = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                  std::string(kMaxRequestHeaderBytes + 100, 'a') + "\r\n\r\n";
  auto big = http_exchange(server->port(), huge_header);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 431);
  const std::string big_body = "GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                               std::to_string(kMaxRequestBodyBytes + 1) + "\r\n\r\n" +
                               std::string(kMaxRequestBodyBytes + 1, 'b');
  auto body = http_exchange(server->port(), big_body);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->status, 413);
  auto garbage = http_exchange(server->port(), "HELLO THERE\r\n\r\n");
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->status, 400);
  // The server still answers afterwards.
  auto ok = http_get(server->port(), "/metrics");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST(MetricsServer, AProviderThatThrowsGives500) {
  auto server = MetricsServer::start({"127.0.0.1", 0}, []() -> telemetry::JobTelemetry {
    throw std::runtime_error("no snapshot");
  });
  ASSERT_TRUE(server.is_ok());
  auto reply = http_get((*server)->port(), "/metrics");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 500);
  EXPECT_NE(reply->body.find("no snapshot"), std::string::npos);
}

TEST(MetricsServer, StopClosesThePortAndIsIdempotent) {
  auto server = start_sample_server();
  ASSERT_TRUE(server);
  const int port = server->port();
  // A connection left open (an idle keep-alive scraper) does not hold stop() up.
  auto idle = http_exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(idle);
  server->stop();
  server->stop();
  EXPECT_FALSE(http_get(port, "/metrics", std::chrono::milliseconds(500)));
}

TEST(MetricsServer, ABusyPortOrABadAddressIsAReadableError) {
  auto first = start_sample_server();
  ASSERT_TRUE(first);
  auto second =
      MetricsServer::start({"127.0.0.1", first->port()}, [] { return telemetry::JobTelemetry{}; });
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(
      second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(first->port())),
      std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find("--metrics-port"), std::string::npos)
      << second.status().message();
  auto bad = MetricsServer::start({"not an address", 0}, [] { return telemetry::JobTelemetry{}; });
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("'not an address' is not an IP address"), std::string::npos)
      << bad.status().message();
}

TEST(MetricsServer, Ipv6AddressesAreBracketedInTheUrl) {
  auto server = MetricsServer::start({"::1", 0}, [] { return telemetry::JobTelemetry{}; });
  if (!server.is_ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status().message();
  EXPECT_EQ((*server)->url(), "http://[::1]:" + std::to_string((*server)->port()) + "/metrics");
}

TEST(MetricsServer, ServesConcurrentScrapers) {
  auto server = start_sample_server();
  ASSERT_TRUE(server);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        auto reply = http_get(server->port(), "/metrics");
        if (reply && reply->status == 200) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
}

}  // namespace
}  // namespace hvrun::coordinator::metrics
