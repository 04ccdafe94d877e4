// The worker's gRPC client of the coordinator: registration, key-value store, abort, and the
// negotiation stream. Every unary call carries the job secret and a deadline.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "hvrun.grpc.pb.h"
#include "worker_lib/kv_store.h"

namespace hvrun::detail {

// The bidirectional Negotiate stream. One reader thread may call read() while writer threads
// call write() (serialised here: the background thread and the heartbeat thread both write);
// cancel() may be called from any thread.
class NegotiationStream {
 public:
  NegotiationStream() = default;
  // False once the stream is closed for writing (gRPC forbids Write after WritesDone).
  bool write(const v1::WorkerMessage& message) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    return !closed_ && stream_->Write(message);
  }
  bool read(v1::CoordinatorMessage* message) { return stream_->Read(message); }
  // Writes `last` (Goodbye) and half-closes in one step, so no other writer's message can land
  // between them or after.
  bool write_last(const v1::WorkerMessage& last) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (closed_) return false;
    closed_ = true;
    return stream_->Write(last) && stream_->WritesDone();
  }
  // Half-closes without a last message (a rank leaving after reporting its failure).
  bool close_writes() {
    std::lock_guard<std::mutex> lock(write_mutex_);
    if (closed_) return false;
    closed_ = true;
    return stream_->WritesDone();
  }
  void cancel() { context_.TryCancel(); }
  // The stream's final status, as the coordinator (or gRPC, for a broken connection) ended it:
  // OK or CANCELLED after a clean end. Call once read() returned false; later calls return the
  // same status. Closes the stream for writing (write() returns false afterwards).
  Status finish();

 private:
  friend class CoordinatorClient;
  std::mutex write_mutex_;
  bool closed_ = false;  // guarded by write_mutex_
  std::mutex finish_mutex_;  // taken before write_mutex_
  std::optional<grpc::Status> final_status_;  // guarded by finish_mutex_
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream_;
};

class CoordinatorClient final : public KeyValueStore {
 public:
  CoordinatorClient(const std::string& address, std::string secret);

  Result<v1::RegisterResponse> register_worker(const v1::RegisterRequest& request,
                                               std::chrono::milliseconds deadline);
  Status set(const std::string& key, const std::string& value) override;
  Status set_many(const Entries& entries) override;
  Result<std::vector<std::string>> get(const std::vector<std::string>& keys,
                                       std::chrono::milliseconds timeout) override;
  Status abort(const v1::AbortRequest& request,
               std::chrono::milliseconds deadline = std::chrono::seconds(30));
  std::unique_ptr<NegotiationStream> open_stream();

  const std::string& address() const { return address_; }

 private:
  void prepare(grpc::ClientContext& context, std::chrono::milliseconds deadline) const;
  Status from_grpc(const grpc::Status& status, const std::string& what) const;

  std::string address_;
  std::string secret_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace hvrun::detail
