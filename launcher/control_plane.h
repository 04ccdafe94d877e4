// The job's coordinator as the launcher sees it: started in-process before the workers
// (coordinator/server.h), its events turned into job failures, aborted when the job fails.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/settings.h"
#include "common/status.h"
#include "coordinator/telemetry/job_telemetry.h"
#include "launcher/job_plan.h"

namespace hvrun::launcher {

struct ControlPlaneEvents {
  // Registration timed out, the job was aborted, or a worker's stream was lost. Called on a
  // coordinator thread: post, never block.
  std::function<void(const std::string& message, int rank)> on_failure;
  // Informational (every rank registered). Same thread rules.
  std::function<void(const std::string& message)> on_note;
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual std::string address() const = 0;  // what workers dial (HVRUN_COORDINATOR_ADDR)
  virtual void abort(const std::string& reason, int rank, const std::string& host) = 0;
  virtual void shutdown() = 0;
  // What the ranks are doing (coordinator/server.h telemetry()); readable after shutdown().
  virtual coordinator::telemetry::JobTelemetry telemetry() const { return {}; }
  // The coordinator's verdict so far: nullopt while the job runs, OK when every rank left
  // cleanly, else why it failed (an abort's reason). Never blocks.
  virtual std::optional<Status> verdict() { return std::nullopt; }
};

Result<std::unique_ptr<ControlPlane>> start_control_plane(const Settings& settings,
                                                          const JobPlan& plan,
                                                          const std::string& secret,
                                                          const std::string& job_id,
                                                          ControlPlaneEvents events,
                                                          const std::string& listen_on = "");
// `listen_on`: "ADDR:PORT" to listen on (multi-host jobs: the launch host's chosen interface);
// empty: a unix socket, or loopback TCP with --coordinator-port (single-host jobs).

// "unix:/tmp/<job id>.sock" when a single-host job's coordinator will listen there and a socket
// can be made at that path (checked by binding one), else "": the launcher may then start the
// workers while the coordinator starts (they retry the connection within milliseconds).
std::string predictable_unix_address(const Settings& settings, const std::string& job_id);

}  // namespace hvrun::launcher
