// hvrun's /metrics endpoint: a small HTTP/1.1 server (Boost.Beast) on a thread of its own that
// answers GET /metrics with the Prometheus text format, rendered from a snapshot provider at
// each scrape, and 404 for any other path.
//
// The provider outlives coordinators: hvrun keeps one server across restart attempts and points
// the provider at whichever coordinator runs (launcher/telemetry/telemetry_hub.h); the daemon
// hvrun-coordinator serves its one coordinator. The provider runs on the server's thread and must
// not block for long (JobTelemetry snapshots are copies).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/telemetry/job_telemetry.h"

namespace hvrun::coordinator::metrics {

struct MetricsServerOptions {
  std::string address = "127.0.0.1";  // an IPv4/IPv6 address to listen on; "0.0.0.0" = all
  int port = 0;                       // 0 = a free port (see MetricsServer::port())
  // Idle or slow clients must never deny a scrape (a local user could otherwise hold every
  // connection): a connection that sends no request for idle_timeout is closed (scrapers
  // reconnect cheaply); a request must arrive whole, and its reply be taken, within
  // request_timeout; at max_connections a new connection evicts the oldest idle one
  // (coordinator/metrics/scrape_session.h).
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds request_timeout{5000};
  int max_connections = 32;
};

class MetricsServer {
 public:
  using Provider = std::function<telemetry::JobTelemetry()>;
  // Renders the page; the default is render_metrics(provider()). Tests may pass their own.
  using Renderer = std::function<std::string()>;

  // Binds and starts serving. Fails with a readable message (bad address, port in use).
  static Result<std::unique_ptr<MetricsServer>> start(const MetricsServerOptions& options,
                                                      Provider provider);
  static Result<std::unique_ptr<MetricsServer>> start_with_renderer(
      const MetricsServerOptions& options, Renderer renderer);

  virtual ~MetricsServer() = default;  // stop()s

  // The bound port and "http://ADDR:PORT/metrics" (IPv6 in brackets).
  virtual int port() const = 0;
  virtual std::string url() const = 0;

  // Closes the listening socket and every connection, joins the thread. Idempotent.
  virtual void stop() = 0;
};

// Limits of one request (a scrape is a short GET): larger requests get 431/413 and are closed.
inline constexpr size_t kMaxRequestHeaderBytes = 8 * 1024;
inline constexpr size_t kMaxRequestBodyBytes = 1024;

}  // namespace hvrun::coordinator::metrics
