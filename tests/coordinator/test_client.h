// A minimal worker-side client of the coordinator for service tests: real gRPC, no worker library.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "hvrun.grpc.pb.h"

namespace hvrun::coordinator::testing {

inline constexpr char kTestSecret[] = "test-secret-0123456789";

class TestClient {
 public:
  explicit TestClient(const std::string& address, std::string secret = kTestSecret)
      : secret_(std::move(secret)),
        stub_(v1::Coordinator::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  // A context carrying the secret (when non-empty) and a deadline.
  std::unique_ptr<grpc::ClientContext> context(
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!secret_.empty()) ctx->AddMetadata("x-hvrun-secret", secret_);
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
  }

  grpc::Status register_worker(int requested_rank, const std::string& host,
                               v1::RegisterResponse* response,
                               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    v1::RegisterRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    request.mutable_worker()->set_host(host);
    request.mutable_worker()->set_local_rank(-1);
    request.mutable_worker()->set_pid(1000 + requested_rank);
    request.mutable_worker()->set_requested_rank(requested_rank);
    request.mutable_worker()->set_device_kind(v1::DEVICE_KIND_CPU);
    auto ctx = context(timeout);
    return stub_->Register(ctx.get(), request, response);
  }

  grpc::Status kv_set(const std::string& key, const std::string& value) {
    v1::KvSetRequest request;
    request.set_key(key);
    request.set_value(value);
    v1::KvSetResponse response;
    auto ctx = context();
    return stub_->KvSet(ctx.get(), request, &response);
  }

  grpc::Status kv_get(const std::vector<std::string>& keys, int64_t timeout_ms,
                      v1::KvGetResponse* response) {
    v1::KvGetRequest request;
    for (const auto& key : keys) request.add_keys(key);
    request.set_timeout_ms(timeout_ms);
    auto ctx = context();
    return stub_->KvGet(ctx.get(), request, response);
  }

  v1::Coordinator::Stub& stub() { return *stub_; }

 private:
  std::string secret_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

// One rank's Negotiate stream.
class TestStream {
 public:
  TestStream(TestClient& client, std::chrono::milliseconds timeout = std::chrono::seconds(20))
      : context_(client.context(timeout)), stream_(client.stub().Negotiate(context_.get())) {}

  bool hello(int rank) {
    v1::WorkerMessage message;
    message.mutable_hello()->set_rank(rank);
    return stream_->Write(message);
  }
  bool send(const v1::RequestBatch& batch) {
    v1::WorkerMessage message;
    *message.mutable_requests() = batch;
    return stream_->Write(message);
  }
  bool goodbye() {
    v1::WorkerMessage message;
    message.mutable_goodbye();
    return stream_->Write(message);
  }
  bool write(const v1::WorkerMessage& message) { return stream_->Write(message); }
  bool read(v1::CoordinatorMessage* message) { return stream_->Read(message); }
  grpc::Status close() {
    stream_->WritesDone();
    v1::CoordinatorMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }
  // Drops the connection without Goodbye (as a crashed worker would).
  void cancel() { context_->TryCancel(); }
  grpc::Status finish() { return stream_->Finish(); }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream_;
};

inline v1::TensorRequest allreduce_request(const std::string& name, std::vector<int64_t> shape,
                                           v1::DataType dtype = v1::DATA_TYPE_FLOAT32) {
  v1::TensorRequest request;
  request.set_name(name);
  request.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
  request.set_dtype(dtype);
  request.set_device(v1::DEVICE_KIND_CPU);
  request.set_reduce_op(v1::REDUCE_OP_SUM);
  for (int64_t d : shape) request.add_shape(d);
  return request;
}

}  // namespace hvrun::coordinator::testing
