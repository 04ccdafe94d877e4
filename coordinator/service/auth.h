// The per-job secret every call must carry in metadata "x-hvrun-secret".
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "common/status.h"

namespace hvrun::coordinator::service {

inline constexpr char kSecretMetadataKey[] = "x-hvrun-secret";

// OK when the call carries `secret`; else UNAUTHENTICATED, logged with the peer address and the
// method (never the secret, nor what the caller sent).
Status check_secret(const grpc::ServerContextBase& context, const std::string& secret,
                    const char* method);

}  // namespace hvrun::coordinator::service
