// One attempt of a job (docs/design/launch.md): everything a launch sets up, written once for
// every placement (placement.h): the job's secret and id, hvrun's output sinks, the runner's
// settings, the environment every rank starts from and hvrun's NCCL decisions, the coordinator
// with its events (failures and notes to the runner, autopsies to the autopsy reporter), and at
// the end the coordinator's word on how the job went. The placement says only where each rank's
// process starts and how, and when the coordinator can start (where the ranks reach it).
//
// Threads: run() on the thread that lives as long as the job; the placement calls the rest from
// that thread or the supervisor's loop. The coordinator's hooks are thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "launcher/control/control_plane.h"
#include "launcher/elastic/elastic_options.h"
#include "launcher/options/options.h"
#include "launcher/plan/job_plan.h"
#include "launcher/plan/rank_environment.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/process/output_mux.h"
#include "launcher/supervisor/job_summary.h"
#include "launcher/supervisor/supervised_job.h"
#include "launcher/telemetry/telemetry_hub.h"

namespace hvrun::launcher {

class Placement;

class Attempt {
 public:
  // `elastic` was read from `opts` once per job; `telemetry` (may be null) reads this attempt's
  // coordinator while the job runs.
  Attempt(const LaunchOptions& opts, const JobPlan& plan, const ElasticOptions& elastic,
          OrphanGuard& guard, TelemetryHub* telemetry);
  ~Attempt();
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  // Runs the attempt with `placement`; returns hvrun's exit code. How the job ended goes to
  // `end` when it failed.
  int run(Placement& placement, JobEnd* end);

  // For the placement, while run() runs.
  const LaunchOptions& options() const { return opts_; }
  const Settings& settings() const { return opts_.settings; }
  const JobPlan& plan() const { return plan_; }
  const ElasticOptions& elastic() const { return elastic_; }
  OrphanGuard& guard() { return guard_; }
  OutputSink& out() { return *out_; }
  OutputSink& err() { return *err_; }
  const std::string& job_id() const { return job_id_; }
  bool verbose() const;
  // hvrun's own environment, and what every rank starts from: it with the -x variables applied.
  const Environment& session() const { return session_; }
  const Environment& launch_environment() const { return launch_; }
  // hvrun's NCCL variables for every rank, before a host's network adds its own.
  const NcclTuning& nccl() const { return nccl_; }

  // The runner's settings, its hooks onto this attempt's coordinator included.
  SupervisedJobConfig runner_config();
  // The runner the ranks run under: the coordinator's events go to it.
  void supervise(SupervisedJob& runner) { runner_ = &runner; }
  // The job's identity for a rank that reaches the coordinator at `coordinator_address` and
  // whose host's data plane binds `data_address`.
  JobIdentity identity(const std::string& coordinator_address,
                       const std::string& data_address = "127.0.0.1") const;
  // The environment of launch-plan rank `rank`, from `base` with `tuning`.
  Environment rank_environment(int rank, const JobIdentity& identity, const NcclTuning& tuning,
                               const Environment& base) const;
  // An elastic process `id` started in `slot` (the launch plan may not have it), likewise;
  // `spare`: a hot spare, parked outside the membership.
  Environment member_environment(int id, const ElasticSlot& slot, bool spare,
                                 const JobIdentity& identity, const NcclTuning& tuning,
                                 const Environment& base) const;
  // "hvrun: rank 3 environment: K=V ..." with what `env` adds to `base` (the secret masked).
  static std::string environment_line(int rank, const Environment& env, const Environment& base);

  // Starts the coordinator listening on `listen_on` ("ADDR:PORT"; empty: loopback TCP on
  // --coordinator-port). Returns the address it listens on.
  Result<std::string> start_coordinator(const std::string& listen_on);
  // For ranks whose processes start on this host: where they reach the coordinator. A unix
  // socket whose address is known beforehand lets the coordinator start on a thread of its own
  // while the ranks start (a failure then ends the job through the runner); otherwise it
  // starts first, on `listen_on` as start_coordinator(). An error: it did not start.
  Result<std::string> start_coordinator_for_this_host(const std::string& listen_on);
  // The job will not start: says why (the coordinator did not start); run() returns 1.
  int coordinator_failed(const Status& why);
  // Elastic jobs: membership changes onto the coordinator.
  ElasticHooks elastic_hooks();

 private:
  ControlPlaneEvents events(Placement& placement);
  // After the placement's run: the coordinator stopped, and its word on how the job went.
  int finish(int code, JobEnd* end);

  const LaunchOptions& opts_;
  const JobPlan& plan_;
  const ElasticOptions& elastic_;
  OrphanGuard& guard_;
  TelemetryHub* telemetry_;
  Placement* placement_ = nullptr;      // while run() runs
  SupervisedJob* runner_ = nullptr;     // once the placement made it
  std::string secret_, job_id_;
  Environment session_, launch_;
  NcclTuning nccl_;
  OpenLine terminal_line_;  // one cursor when stdout and stderr are the same terminal or file
  std::optional<OutputSink> out_, err_;
  std::optional<JobEnd> start_failure_;  // the job ended before its runner ran

  // The coordinator: set by whichever thread starts it, read by the runner's hooks.
  std::mutex control_mutex_;
  std::unique_ptr<ControlPlane> control_;  // guarded by control_mutex_
  EarlyExits early_exits_;                 // guarded by control_mutex_
  std::thread starter_;                    // starts it beside the ranks
};

}  // namespace hvrun::launcher
