#include "coordinator/stream_sink.h"

#include <string>

namespace hvrun::coordinator {

std::shared_ptr<const grpc::ByteBuffer> serialize(const v1::CoordinatorMessage& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes);
  return std::make_shared<const grpc::ByteBuffer>(&slice, 1);
}

}  // namespace hvrun::coordinator
