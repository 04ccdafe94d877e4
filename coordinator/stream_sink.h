// Where the coordinator sends one worker's messages (its Negotiate stream): the service's
// negotiation loop sends plans, the telemetry aggregator the timeline's state. Messages are
// CoordinatorMessages serialized once (a plan goes to every rank: serializing it per stream
// would cost the loop thread as much as negotiating it). The service implements it
// (service/negotiate_reactor.h); this interface sits at the coordinator's root so that both
// the service and telemetry/ depend on it, and telemetry/ never on the service.
#pragma once

#include <memory>

#include <grpcpp/support/byte_buffer.h>

#include "common/status.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator {

class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Queues a message; messages are written in the order of send() calls. Never blocks.
  virtual void send(std::shared_ptr<const grpc::ByteBuffer> message) = 0;
  // Ends the stream with `status` once the queued messages are written. Idempotent.
  virtual void finish(const Status& status) = 0;
};

// A CoordinatorMessage as the bytes every stream sends.
std::shared_ptr<const grpc::ByteBuffer> serialize(const v1::CoordinatorMessage& message);

}  // namespace hvrun::coordinator
