// One worker's Negotiate stream (gRPC callback API, one reactor per stream): reads Hello, then
// hands batches to the negotiation loop; writes Welcome, plans and JobAbort in order from a queue.
//
// Threads: gRPC calls the On* methods; the loop calls send()/finish() from its own thread. The
// reactor deletes itself in OnDone; the loop holds only the Outbox, which outlives it.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "coordinator/service/job.h"
#include "coordinator/stream_sink.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator::service {

class NegotiateReactor;

// The write side of one stream: a queue with at most one write in flight.
class Outbox final : public StreamSink {
 public:
  explicit Outbox(NegotiateReactor* reactor) : reactor_(reactor) {}
  void send(std::shared_ptr<const grpc::ByteBuffer> message) override;
  void finish(const Status& status) override;

  void on_write_done(bool ok);  // from the reactor
  void on_done();               // the reactor is going away
  bool finishing();             // finish() was called: read no further

 private:
  std::mutex mutex_;
  NegotiateReactor* reactor_;                                   // guarded by mutex_
  std::deque<std::shared_ptr<const grpc::ByteBuffer>> queue_;  // front = in flight
  bool writing_ = false;
  bool finish_requested_ = false;
  bool finished_ = false;
  grpc::Status finish_status_;
};

// Raw bytes both ways: plans arrive serialized once for all streams (stream_sink.h); incoming
// WorkerMessages are parsed here.
class NegotiateReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // `refusal`: when not OK (bad secret, ...), the stream is finished with it at once.
  NegotiateReactor(Job& job, std::string peer, const Status& refusal);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void handle(const v1::WorkerMessage& message);
  void on_hello(const v1::Hello& hello);
  // "rank R on host H (pid P)", or the peer's address before Hello.
  std::string who() const;
  // The worker broke the protocol (`problem` says how, after who()): logged, the job aborted
  // with it when the stream belongs to a rank, and the stream finished.
  void refuse(const Status& problem);

  Job& job_;
  Generation* generation_ = nullptr;  // set with attached_: the generation this stream joined
  const std::string peer_;
  std::shared_ptr<Outbox> outbox_;
  grpc::ByteBuffer incoming_;   // the read in flight
  int rank_ = -1;               // after Hello
  bool attached_ = false;
  bool said_goodbye_ = false;
  bool refused_ = false;
};

}  // namespace hvrun::coordinator::service
