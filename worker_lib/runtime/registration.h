// Step 1 of a worker's life: Register with the coordinator (blocks until every rank
// registered) and read what the answer says about the job.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "hvrun.pb.h"
#include "hvrun/hvrun.h"
#include "worker_lib/runtime/coordinator_client.h"

namespace hvrun::detail {

struct Registration {
  v1::RegisterResponse response;
  Topology topology;
  // The coordinator's heartbeat timeout (its setting, which every rank gets at registration);
  // nullopt when it has none (never times out).
  std::optional<std::chrono::milliseconds> heartbeat_timeout;
  bool timeline_from_start = false;  // --timeline-filename: record from the first collective
  int64_t fusion_threshold_bytes = 0;  // the coordinator's; 0 = no fusion
  std::chrono::microseconds cycle_time{0};  // the coordinator's
  // Every rank's host, by rank (the response's placement unpacked); empty when the coordinator
  // gave none or one that does not cover every rank, which leaves the placement unknown.
  std::vector<std::string> hosts;
};

// Registers this process (`config.host` filled in) and checks the protocol version.
Result<Registration> register_worker(const Config& config, CoordinatorClient& client);

}  // namespace hvrun::detail
