#include "worker_lib/runtime/coordinator_client.h"

#include <grpc/grpc.h>

namespace hvrun::detail {
namespace {

constexpr std::chrono::milliseconds kUnaryDeadline{30000};
constexpr std::chrono::milliseconds kKeepaliveTime{2000};
constexpr std::chrono::milliseconds kKeepaliveTimeout{3000};
constexpr std::chrono::milliseconds kMinReconnect{10};
constexpr std::chrono::milliseconds kMaxReconnect{500};

Status convert(const grpc::Status& status, const std::string& what, const std::string& address) {
  if (status.ok()) return Status::ok();
  // hvrun's StatusCode values are gRPC's codes (common/status.h).
  auto code = static_cast<StatusCode>(static_cast<int>(status.error_code()));
  if (status.error_code() == grpc::StatusCode::UNKNOWN) code = StatusCode::kInternal;
  std::string message = what + " (coordinator " + address + "): " + status.error_message();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE)
    message += " — is the coordinator running and HVRUN_COORDINATOR_ADDR right?";
  return Status(code, message);
}

// gRPC shuts its library down (joining its executor and timer threads) when the last channel
// goes: 10-50 ms of every worker's exit, most of hvrun's launch-to-exit time for short jobs.
// One reference held for the process's life makes a channel's destruction cheap; the OS
// reclaims the threads at exit. A later Worker::init in the same process reuses them.
void keep_grpc_initialized() {
  static const bool initialized = [] {
    grpc_init();
    return true;
  }();
  (void)initialized;
}

}  // namespace

Status NegotiationStream::finish() {
  std::lock_guard<std::mutex> lock(finish_mutex_);
  if (!final_status_) {
    // gRPC allows one Finish per call and no Write beside or after it: writers (the heartbeat,
    // the background loop, shutdown) find the stream closed from here on.
    std::lock_guard<std::mutex> writes(write_mutex_);
    closed_ = true;
    final_status_ = stream_->Finish();
  }
  const grpc::Status& status = *final_status_;
  if (status.ok() || status.error_code() == grpc::StatusCode::CANCELLED) return Status::ok();
  return Status(static_cast<StatusCode>(static_cast<int>(status.error_code())),
                "negotiation stream: " + status.error_message());
}

CoordinatorClient::CoordinatorClient(const std::string& address, std::string secret)
    : address_(address), secret_(std::move(secret)) {
  keep_grpc_initialized();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // A coordinator that hangs (stopped, its host gone without a reset) leaves the stream open;
  // HTTP/2 pings unanswered for kKeepaliveTimeout fail it, so workers fail within ~10 s.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(kKeepaliveTime.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(kKeepaliveTimeout.count()));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // The launcher may start its coordinator while the workers start; a worker that finds no
  // listener yet retries within milliseconds instead of gRPC's default one-second backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(kMinReconnect.count()));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(kMinReconnect.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(kMaxReconnect.count()));
  channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Coordinator::NewStub(channel_);
}

void CoordinatorClient::prepare(grpc::ClientContext& context,
                                std::chrono::milliseconds deadline) const {
  context.AddMetadata("x-hvrun-secret", secret_);
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  context.set_wait_for_ready(true);  // the coordinator may still be starting
}

Status CoordinatorClient::from_grpc(const grpc::Status& status, const std::string& what) const {
  return convert(status, what, address_);
}

Result<v1::RegisterResponse> CoordinatorClient::register_worker(
    const v1::RegisterRequest& request, std::chrono::milliseconds deadline) {
  grpc::ClientContext context;
  prepare(context, deadline);
  v1::RegisterResponse response;
  HVRUN_RETURN_IF_ERROR(
      from_grpc(stub_->Register(&context, request, &response), "registration failed"));
  return response;
}

Status CoordinatorClient::set(const std::string& key, const std::string& value) {
  grpc::ClientContext context;
  prepare(context, kUnaryDeadline);
  v1::KvSetRequest request;
  request.set_key(key);
  request.set_value(value);
  v1::KvSetResponse response;
  return from_grpc(stub_->KvSet(&context, request, &response), "KvSet '" + key + "'");
}

Status CoordinatorClient::set_many(const Entries& entries) {
  if (entries.empty()) return Status::ok();
  grpc::ClientContext context;
  prepare(context, kUnaryDeadline);
  v1::KvSetRequest request;
  request.set_key(entries.front().first);
  request.set_value(entries.front().second);
  for (size_t i = 1; i < entries.size(); ++i) {
    v1::KvEntry* more = request.add_more();
    more->set_key(entries[i].first);
    more->set_value(entries[i].second);
  }
  v1::KvSetResponse response;
  return from_grpc(stub_->KvSet(&context, request, &response),
                   "KvSet '" + entries.front().first + "' and " +
                       std::to_string(entries.size() - 1) + " more");
}

Result<std::vector<std::string>> CoordinatorClient::get(const std::vector<std::string>& keys,
                                                        std::chrono::milliseconds timeout) {
  grpc::ClientContext context;
  prepare(context, timeout + std::chrono::seconds(10));
  v1::KvGetRequest request;
  for (const auto& k : keys) request.add_keys(k);
  request.set_timeout_ms(timeout.count());
  v1::KvGetResponse response;
  // The coordinator's error names the missing keys; these name the request (a mesh's reads
  // ask for a key per peer: the first few say which).
  constexpr size_t kKeysNamed = 3;
  std::string what = "KvGet";
  for (size_t i = 0; i < keys.size() && i < kKeysNamed; ++i) what += " '" + keys[i] + "'";
  if (keys.size() > kKeysNamed)
    what += " and " + std::to_string(keys.size() - kKeysNamed) + " more";
  HVRUN_RETURN_IF_ERROR(from_grpc(stub_->KvGet(&context, request, &response), what));
  if (response.values_size() != static_cast<int>(keys.size()))
    return internal_error(what + ": coordinator returned " +
                          std::to_string(response.values_size()) + " values");
  return std::vector<std::string>(response.values().begin(), response.values().end());
}

Status CoordinatorClient::abort(const v1::AbortRequest& request,
                                std::chrono::milliseconds deadline) {
  grpc::ClientContext context;
  prepare(context, deadline);
  v1::AbortResponse response;
  return from_grpc(stub_->Abort(&context, request, &response), "Abort");
}

std::unique_ptr<NegotiationStream> CoordinatorClient::open_stream() {
  auto stream = std::make_unique<NegotiationStream>();
  stream->context_.AddMetadata("x-hvrun-secret", secret_);
  stream->stream_ = stub_->Negotiate(&stream->context_);
  return stream;
}

}  // namespace hvrun::detail
