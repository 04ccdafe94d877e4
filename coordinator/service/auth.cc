#include "coordinator/service/auth.h"

#include <spdlog/spdlog.h>

namespace hvrun::coordinator::service {

namespace {
// Compares without an early exit, so timing does not reveal how much of a guess was right.
bool equal_in_constant_time(std::string_view a, std::string_view b) {
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return difference == 0;
}
}  // namespace

Status check_secret(const grpc::ServerContextBase& context, const std::string& secret,
                    const char* method) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kSecretMetadataKey);
  const bool present = it != metadata.end();
  if (present && equal_in_constant_time(std::string_view(it->second.data(), it->second.size()),
                                        secret)) {
    return Status::ok();
  }
  spdlog::warn("rejected {} from {}: {} job secret (metadata {})", method, context.peer(),
               present ? "wrong" : "no", kSecretMetadataKey);
  return unauthenticated(std::string(method) + ": the call carries " +
                         (present ? "a wrong" : "no") + " job secret (metadata " +
                         kSecretMetadataKey +
                         "); workers take it from HVRUN_SECRET, which the launcher sets");
}

}  // namespace hvrun::coordinator::service
