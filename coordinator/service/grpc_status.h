// hvrun::Status <-> grpc::Status at the coordinator's edge. hvrun's codes carry gRPC's numbers,
// so each of ours maps to the gRPC code of the same name and back; the few gRPC codes hvrun has no
// name for (UNKNOWN, PERMISSION_DENIED, OUT_OF_RANGE, DATA_LOSS) map to the nearest of ours,
// keeping gRPC's name in the message.
#pragma once

#include <string>

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace hvrun::coordinator {

inline grpc::Status to_grpc(const Status& status) {
  if (status.is_ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())),
                      status.message());
}

inline Status from_grpc(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return Status::ok();
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status(static_cast<StatusCode>(static_cast<int>(status.error_code())),
                    status.error_message());
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status(StatusCode::kUnauthenticated, "PERMISSION_DENIED: " + status.error_message());
    case grpc::StatusCode::OUT_OF_RANGE:
      return Status(StatusCode::kInvalidArgument, "OUT_OF_RANGE: " + status.error_message());
    case grpc::StatusCode::DATA_LOSS:
      return Status(StatusCode::kInternal, "DATA_LOSS: " + status.error_message());
    default:
      return Status(StatusCode::kInternal, "UNKNOWN: " + status.error_message());
  }
}

}  // namespace hvrun::coordinator

// In a gRPC handler: returns the hvrun::Status `expr` as a grpc::Status when it is an error.
#define HVRUN_RETURN_IF_ERROR_GRPC(expr)                                  \
  do {                                                                   \
    ::hvrun::Status hvrun_grpc_status_ = (expr);                         \
    if (!hvrun_grpc_status_.is_ok()) return ::hvrun::coordinator::to_grpc(hvrun_grpc_status_); \
  } while (0)
