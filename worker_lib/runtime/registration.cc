#include "worker_lib/runtime/registration.h"

#include <unistd.h>

#include <algorithm>

namespace hvrun::detail {
namespace {

constexpr int kProtocolVersion = v1::PROTOCOL_VERSION_CURRENT;
constexpr std::chrono::seconds kRegisterSlack{10};
// A spare's registration: longer than any job, short enough for a gRPC deadline.
constexpr std::chrono::milliseconds kSpareWait = std::chrono::hours(24 * 365);

}  // namespace

Result<Registration> register_worker(const Config& config, CoordinatorClient& client) {
  v1::RegisterRequest request;
  request.set_protocol_version(kProtocolVersion);
  v1::WorkerInfo* info = request.mutable_worker();
  info->set_host(config.host);
  info->set_local_rank(config.local_rank);
  info->set_pid(static_cast<int32_t>(getpid()));
  info->set_device_kind(v1::DEVICE_KIND_CPU);
  info->set_requested_rank(config.requested_rank);
  info->set_hvrun_version(hvrun::version());
  info->set_job_id(config.job_id);
  info->set_spare(config.elastic && config.spare);
  // An elastic job's survivor may wait for the next membership as long as the launcher may take
  // to form it; a hot spare as long as the job runs (the coordinator answers it when the job
  // fails or stops, and a lost coordinator breaks the call).
  const std::chrono::milliseconds wait =
      config.elastic && config.spare ? kSpareWait
      : config.elastic               ? std::max(config.start_timeout, config.elastic_timeout)
                                     : config.start_timeout;
  HVRUN_ASSIGN_OR_RETURN(
      v1::RegisterResponse registered,
      client.register_worker(
          request, wait + std::chrono::duration_cast<std::chrono::milliseconds>(kRegisterSlack)));
  if (registered.protocol_version() != 0 && registered.protocol_version() != kProtocolVersion)
    return failed_precondition("coordinator speaks protocol version " +
                               std::to_string(registered.protocol_version()) +
                               ", this worker library " + std::to_string(kProtocolVersion) +
                               ": use the same hvrun version everywhere");
  Registration r;
  const v1::Topology& t = registered.topology();
  r.topology = Topology{t.rank(), t.size(), t.local_rank(), t.local_size(), t.cross_rank(),
                        t.cross_size()};
  const v1::WorkerSettings& settings = registered.worker_settings();
  if (settings.heartbeat_timeout_ms() > 0)
    r.heartbeat_timeout = std::chrono::milliseconds(settings.heartbeat_timeout_ms());
  r.timeline_from_start = settings.timeline_from_start();
  r.fusion_threshold_bytes = settings.fusion_threshold_bytes();
  r.cycle_time = std::chrono::microseconds(settings.cycle_time_us());
  v1::HostPlacement placement;
  if (placement.ParseFromString(registered.placement()) &&
      placement.host_of_rank_size() == t.size()) {
    r.hosts.reserve(static_cast<size_t>(t.size()));
    for (uint32_t index : placement.host_of_rank()) {
      if (index >= static_cast<uint32_t>(placement.hosts_size())) {
        r.hosts.clear();
        break;
      }
      r.hosts.push_back(placement.hosts(static_cast<int>(index)));
    }
  }
  r.response = std::move(registered);
  return r;
}

}  // namespace hvrun::detail
