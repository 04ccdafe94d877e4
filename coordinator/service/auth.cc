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
  // An empty value is what a worker without HVRUN_SECRET sends: missing, not wrong.
  const bool present = it != metadata.end() && !it->second.empty();
  if (present && equal_in_constant_time(std::string_view(it->second.data(), it->second.size()),
                                        secret)) {
    return Status::ok();
  }
  spdlog::warn("rejected {} from {}: {} job secret (metadata {})", method, context.peer(),
               present ? "wrong" : "missing", kSecretMetadataKey);
  if (!present)
    return unauthenticated(std::string(method) + ": the call carries no job secret (metadata " +
                           kSecretMetadataKey + " is missing or empty): is HVRUN_SECRET set? "
                           "hvrun sets it for its workers; with another launcher, give every "
                           "rank the secret hvrun-coordinator was started with");
  return unauthenticated(std::string(method) + ": the call carries a wrong job secret (metadata " +
                         kSecretMetadataKey +
                         "): HVRUN_SECRET differs from this coordinator's; is the worker of "
                         "another job, or HVRUN_COORDINATOR_ADDR another job's coordinator?");
}

}  // namespace hvrun::coordinator::service
