// CoordinatorServer: binds the gRPC service for one job and owns everything it serves.
#include "coordinator/service/coordinator_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/job.h"

namespace hvrun::coordinator {

namespace {

constexpr int kMaxMessageBytes = 256 << 20;  // plans and batches of very large models

std::string make_job_id() {
  std::random_device random;
  std::uniform_int_distribution<uint64_t> digits;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(digits(random)));
  return text;
}

// "127.0.0.1:0" with port 40123 -> "127.0.0.1:40123"; unix addresses as they are.
std::string with_port(const std::string& address, int port) {
  if (address.rfind("unix:", 0) == 0) return address;
  const auto colon = address.rfind(':');
  return address.substr(0, colon) + ":" + std::to_string(port);
}

class Server final : public CoordinatorServer {
 public:
  Server(CoordinatorOptions options, EventCallback on_event)
      : job_(std::move(options), std::move(on_event)), service_(job_) {}
  ~Server() override { shutdown(); }

  Status bind() {
    // A --timeline-filename that cannot be created is the user's to fix before the job runs.
    HVRUN_RETURN_IF_ERROR(job_.telemetry().startup_status());
    const std::string& listen = job_.options().listen_address;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error
    // Workers ping every few seconds (HTTP/2 keepalive) to notice a coordinator that hangs;
    // accept those pings however quiet the stream is, instead of answering "too many pings".
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    server_ = builder.BuildAndStart();
    const bool is_unix = listen.rfind("unix:", 0) == 0;
    if (!server_ || (!is_unix && port == 0)) {
      server_.reset();
      return unavailable("coordinator: cannot listen on " + listen +
                         " (address in use, or not an address of this host?); pick another "
                         "--coordinator-port or 0 for a free one");
    }
    // gRPC makes the socket with the umask's mode: only this user may connect.
    if (is_unix && ::chmod(listen.c_str() + 5, 0600) != 0) {
      const int error = errno;
      server_->Shutdown();
      server_.reset();
      ::unlink(listen.c_str() + 5);  // so that the launcher can remove the private directory
      errno = error;
      return unavailable("coordinator: cannot make " + listen.substr(5) + " private (chmod 0600: " +
                         std::strerror(errno) + ")");
    }
    address_ = with_port(listen, port);
    spdlog::info("coordinator for job {} ({} ranks) listening on {}", job_.options().job_id,
                 job_.options().world_size, address_);
    return Status::ok();
  }

  std::string address() const override { return address_; }
  const std::string& job_id() const override { return job_.options().job_id; }

  void abort(const std::string& reason, int rank, const std::string& host) override {
    job_.abort(reason, rank, host);
  }

  std::optional<AbortCause> abort_cause() const override { return job_.abort_cause(); }
  void worker_exited(int rank, const std::string& how) override { job_.worker_exited(rank, how); }
  bool request_autopsy(const std::string& trigger) override { return job_.autopsy(trigger); }
  void change_membership(std::vector<PlannedRank> plan, const std::string& reason, int rank,
                         const std::string& host) override {
    job_.change_membership(std::move(plan), reason, rank, host);
  }
  void add_slots(std::vector<PlannedRank> plan, int added) override {
    job_.add_slots(std::move(plan), added);
  }
  std::vector<PlannedRank> formed_membership() const override { return job_.formed_membership(); }
  std::vector<int> registered_without_stream() override { return job_.registered_without_stream(); }

  void shutdown() override {
    std::lock_guard<std::mutex> lock(shutdown_mutex_);
    if (!server_) return;
    // Wake every waiting call first: the sync handlers wait on our conditions, not on gRPC.
    job_.shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    server_.reset();
    job_.stop_loops();
    job_.telemetry().finish();  // the timeline's closing bracket: valid JSON
  }

  telemetry::JobTelemetry telemetry() const override { return job_.telemetry().snapshot(); }

  std::optional<Status> wait_for_end(std::chrono::milliseconds timeout) override {
    return job_.wait_for_end(timeout);
  }

 private:
  service::Job job_;
  service::CoordinatorService service_;
  std::mutex shutdown_mutex_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::start(CoordinatorOptions options,
                                                                    EventCallback on_event) {
  if (options.world_size <= 0) {
    return invalid_argument("coordinator: the world size must be at least 1 (got " +
                            std::to_string(options.world_size) + ")");
  }
  if (options.secret.empty()) {
    return invalid_argument("coordinator: no job secret; every call must carry one (set "
                            "HVRUN_SECRET or pass it on stdin)");
  }
  if (!options.plan.empty() && static_cast<int>(options.plan.size()) != options.world_size) {
    return invalid_argument("coordinator: the launcher's plan has " +
                            std::to_string(options.plan.size()) + " slots for " +
                            std::to_string(options.world_size) + " ranks");
  }
  if (options.job_id.empty()) options.job_id = make_job_id();
  auto server = std::make_unique<Server>(std::move(options), std::move(on_event));
  HVRUN_RETURN_IF_ERROR(server->bind());
  return std::unique_ptr<CoordinatorServer>(std::move(server));
}

}  // namespace hvrun::coordinator
