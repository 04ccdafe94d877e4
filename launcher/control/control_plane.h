// The job's coordinator as the launcher sees it: started in-process before the workers
// (coordinator/service/coordinator_server.h), its events turned into job failures, aborted when
// the job fails.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/settings.h"
#include "common/status.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/telemetry/job_telemetry.h"
#include "launcher/elastic/elastic_controller.h"
#include "hvrun.pb.h"
#include "launcher/plan/job_plan.h"
#include "launcher/supervisor/job_verdict.h"

namespace hvrun::launcher {

struct ControlPlaneEvents {
  // Registration timed out, the job was aborted, or a worker's stream was lost. Called on a
  // coordinator thread: post, never block.
  std::function<void(const std::string& message, int rank)> on_failure;
  // Informational (every rank registered). Same thread rules.
  std::function<void(const std::string& message)> on_note;
  // An autopsy finished (CoordinatorServer's kAutopsy). Same thread rules.
  std::function<void(std::shared_ptr<const v1::AutopsyJobReport>)> on_autopsy;
};

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual std::string address() const = 0;  // what workers dial (HVRUN_COORDINATOR_ADDR)
  virtual void abort(const std::string& reason, int rank, const std::string& host) = 0;
  // Why the coordinator ended the job, if it did (CoordinatorServer::abort_cause()).
  virtual std::optional<CoordinatorVerdict> verdict() const = 0;
  // Asks every rank for an autopsy (CoordinatorServer::request_autopsy()).
  virtual bool request_autopsy(const std::string& trigger) {
    (void)trigger;
    return false;
  }
  // A rank's process ended (CoordinatorServer::worker_exited()).
  virtual void worker_exited(int rank, const std::string& how) = 0;
  // Elastic jobs (CoordinatorServer::change_membership(), add_slots()).
  virtual void change_membership(std::vector<coordinator::PlannedRank> plan,
                                 const std::string& reason, const std::string& host) {
    (void)plan;
    (void)reason;
    (void)host;
  }
  virtual void add_slots(std::vector<coordinator::PlannedRank> plan, int added) {
    (void)plan;
    (void)added;
  }
  // CoordinatorServer::formed_membership().
  virtual std::vector<coordinator::PlannedRank> formed_membership() const { return {}; }
  virtual void shutdown() = 0;
  // What the ranks are doing (CoordinatorServer::telemetry()); readable after shutdown().
  virtual coordinator::telemetry::JobTelemetry telemetry() const { return {}; }
  // How the coordinator ended the job: nullopt while it runs, OK when every rank left cleanly,
  // else why it failed (an abort's reason). Never blocks.
  virtual std::optional<Status> final_status() { return std::nullopt; }
};

// Ranks that ended while the coordinator was still starting: kept, then told to it once it runs,
// so that a rank exiting before init fails the rendezvous however early it exits.
struct EarlyExits {
  std::vector<std::pair<int, std::string>> exits;  // (rank, how)
};

// The runners' hooks onto `*control`, which may still be null (the coordinator is starting on
// another thread); `mutex`, when not null, guards `*control` and `*early`. `early`, when not
// null, keeps the exits seen while `*control` is null. All outlive the hooks.
CoordinatorHooks coordinator_hooks(const std::unique_ptr<ControlPlane>* control, std::mutex* mutex,
                                   EarlyExits* early = nullptr);
// Elastic jobs: the membership changes onto `*control` (null until it started: they do
// nothing then), under `mutex` when not null, as coordinator_hooks.
ElasticHooks elastic_hooks(const std::unique_ptr<ControlPlane>* control, std::mutex* mutex);
// Tells a coordinator that just started the exits `early` kept (call under the same mutex).
void replay_early_exits(ControlPlane& control, EarlyExits& early);

Result<std::unique_ptr<ControlPlane>> start_control_plane(const Settings& settings,
                                                          const JobPlan& plan,
                                                          const std::string& secret,
                                                          const std::string& job_id,
                                                          ControlPlaneEvents events,
                                                          const std::string& listen_on = "");
// `listen_on`: "ADDR:PORT" to listen on (multi-host jobs: the launch host's chosen interface),
// or an address predictable_unix_address() made (shutdown() removes its socket and directory);
// empty: loopback TCP on --coordinator-port.

// "unix:$TMPDIR/<job id>-XXXXXX/coordinator.sock" in a fresh directory of mode 0700 when a
// single-host job's coordinator will listen there (no --coordinator-port) and a socket can be
// made at that path (checked by binding one), else "": the launcher may then start the workers
// while the coordinator starts (they retry the connection within milliseconds). The caller
// owns the directory until start_control_plane() takes it over.
std::string predictable_unix_address(const Settings& settings, const std::string& job_id);

}  // namespace hvrun::launcher
