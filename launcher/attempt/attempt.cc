#include "launcher/attempt/attempt.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "autopsy/report_files.h"
#include "common/setting_keys.h"
#include "launcher/attempt/placement.h"
#include "launcher/autopsy/autopsy_reporter.h"
#include "launcher/plan/env_forwarding.h"
#include "launcher/plan/secret.h"
#include "launcher/process/shm_cleanup.h"

namespace hvrun::launcher {

Attempt::Attempt(const LaunchOptions& opts, const JobPlan& plan, const ElasticOptions& elastic,
                 OrphanGuard& guard, TelemetryHub* telemetry)
    : opts_(opts), plan_(plan), elastic_(elastic), guard_(guard), telemetry_(telemetry) {}

Attempt::~Attempt() {
  if (starter_.joinable()) starter_.join();
}

bool Attempt::verbose() const { return settings().get(setting::kVerbose); }

int Attempt::run(Placement& placement, JobEnd* end) {
  placement_ = &placement;
  session_ = current_process_environment();
  std::vector<std::string> export_notes;
  launch_ = with_exports(session_, session_, opts_.exports, &export_notes);
  nccl_ = decide_nccl(plan_, settings().get(setting::kNcclP2p), launch_,
                      placement.peer_access_probe());

  const bool one_file = same_file(1, 2);
  if (one_file) {
    out_.emplace(1, terminal_line_);
    err_.emplace(2, terminal_line_);
  } else {
    out_.emplace(1);
    err_.emplace(2);
  }
  auto secret = random_hex(32);
  auto job_suffix = random_hex(4);
  if (!secret.is_ok() || !job_suffix.is_ok()) {
    const Status& why = secret.is_ok() ? job_suffix.status() : secret.status();
    err_->write_message("hvrun: cannot make the job secret: " + why.message() + "\n");
    *end = JobEnd{JobEndKind::kStartFailed, -1, 2, 0, why.message()};
    return 2;
  }
  secret_ = *secret;
  job_id_ = "hvrun-" + *job_suffix;
  guard_.sweep_on_exit(kShmDirectory, shm_segment_prefix(job_id_));  // shared-memory data plane
  for (const std::string& note : export_notes) err_->write_message("hvrun: " + note + "\n");
  spdlog::debug("job {} planned", job_id_);

  // /metrics and the end-of-job summary read this attempt's coordinator (none until it started).
  ScopedTelemetrySource telemetry_source(telemetry_, [this] {
    std::lock_guard<std::mutex> lock(control_mutex_);
    return control_ ? control_->telemetry() : coordinator::telemetry::JobTelemetry{};
  });
  const int code = placement.run(*this);
  return finish(code, end);
}

int Attempt::finish(int code, JobEnd* end) {
  if (starter_.joinable()) starter_.join();
  spdlog::debug("job over (exit code {}); stopping the coordinator", code);
  std::optional<Status> final_status;
  std::optional<CoordinatorVerdict> cause;
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    if (control_) {
      final_status = control_->final_status();
      cause = control_->verdict();
      control_->shutdown();
    }
  }
  if (std::optional<JobEnd> e = runner_ ? runner_->end() : std::nullopt)
    *end = *e;
  else if (start_failure_)
    *end = *start_failure_;
  else if (code != 0)
    *end = JobEnd{JobEndKind::kStartFailed, -1, code, 0, ""};
  // The runner's loop ends with the last rank's exit: when every rank exits 0 right after the
  // coordinator aborted the job, its report may not have reached the loop. The coordinator's
  // word stands.
  if (code == 0 && final_status && !final_status->is_ok() &&
      final_status->code() != StatusCode::kCancelled) {
    const std::string message =
        (final_status->code() == StatusCode::kAborted ? "job aborted: " : "coordinator: ") +
        final_status->message();
    err_->write_message("hvrun: job failed: " + message + "\n");
    *end = JobEnd{JobEndKind::kControlPlane, cause ? cause->rank : -1, 1, 0, message};
    code = 1;
  }
  placement_ = nullptr;
  return code;
}

SupervisedJobConfig Attempt::runner_config() {
  const Settings& s = settings();
  SupervisedJobConfig config;
  config.grace_period = std::chrono::milliseconds(
      static_cast<int64_t>(s.get(setting::kGracePeriodSeconds) * 1000.0));
  config.output_dir = s.get(setting::kOutputFilename);
  config.verbose = s.get(setting::kVerbose);
  config.tag_output = s.get(setting::kTagOutput);
  config.output_timestamps = s.get(setting::kOutputTimestamps);
  config.coordinator = coordinator_hooks(&control_, &control_mutex_, &early_exits_);
  return config;
}

JobIdentity Attempt::identity(const std::string& coordinator_address,
                              const std::string& data_address) const {
  return JobIdentity{coordinator_address, secret_, job_id_, data_address};
}

Environment Attempt::rank_environment(int rank, const JobIdentity& identity,
                                      const NcclTuning& tuning, const Environment& base) const {
  Environment env = launcher::rank_environment(plan_, rank, identity, settings(), tuning, base);
  if (elastic_.enabled) put_elastic_environment(elastic_, /*spare=*/false, env);
  return env;
}

Environment Attempt::member_environment(int id, const ElasticSlot& slot, bool spare,
                                        const JobIdentity& identity, const NcclTuning& tuning,
                                        const Environment& base) const {
  Environment env =
      launcher::rank_environment(plan_with_rank(plan_, id, slot.host, slot.local_rank), id,
                                 identity, settings(), tuning, base);
  put_elastic_environment(elastic_, spare, env);
  return env;
}

std::string Attempt::environment_line(int rank, const Environment& env, const Environment& base) {
  std::string line = "hvrun: rank " + std::to_string(rank) + " environment:";
  for (const auto& [key, value] : describe_additions(env, base)) line += " " + key + "=" + value;
  return line + "\n";
}

ControlPlaneEvents Attempt::events(Placement& placement) {
  SupervisedJob* runner = runner_;
  ControlPlaneEvents events;
  events.on_failure = [runner](const std::string& message, int rank) {
    runner->post_control_plane_failure(message, rank);
  };
  events.on_note = [runner](const std::string& message) { runner->post_note(message); };
  const AutopsyReporting reporting{
      autopsy_directory(settings().get(setting::kAutopsyDir),
                        settings().get(setting::kOutputFilename)),
      placement.ranks_are_local()};
  OutputSink* err = &*err_;
  events.on_autopsy = [runner, &placement, err,
                       reporting](std::shared_ptr<const v1::AutopsyJobReport> report) {
    runner->post_task([&placement, err, reporting, report] {
      placement.complete_autopsy(*report, [err, reporting](const v1::AutopsyJobReport& full) {
        report_autopsy(full, reporting, *err);
      });
    });
  };
  return events;
}

Result<std::string> Attempt::start_coordinator(const std::string& listen_on) {
  auto started =
      start_control_plane(settings(), plan_, secret_, job_id_, events(*placement_), listen_on);
  if (!started.is_ok()) return started.status();
  const std::string address = (*started)->address();
  spdlog::debug("coordinator started on {}", address);
  std::lock_guard<std::mutex> lock(control_mutex_);
  control_ = std::move(started).value();
  replay_early_exits(*control_, early_exits_);
  return address;
}

Result<std::string> Attempt::start_coordinator_for_this_host(const std::string& listen_on) {
  // With a unix socket its address is known now: the coordinator starts on a thread of its own
  // while the workers start (about a tenth of a short job's launch time); otherwise first.
  std::string address = listen_on.empty() ? predictable_unix_address(settings(), job_id_) : "";
  if (address.empty()) {
    HVRUN_ASSIGN_OR_RETURN(address, start_coordinator(listen_on));
  } else {
    starter_ = std::thread([this, address] {
      auto started = start_coordinator(address);
      Status s = started.status();
      if (started.is_ok() && *started != address)
        s = internal_error("the coordinator listens on " + *started + ", not on " + address +
                           " where the workers were sent");
      if (!s.is_ok())
        runner_->post_control_plane_failure("the coordinator did not start: " + s.message(), -1);
    });
  }
  if (address.rfind("unix:", 0) == 0) {  // the socket, then its private directory
    const std::filesystem::path socket = address.substr(5);
    guard_.remove_on_exit(socket.string());
    guard_.remove_on_exit(socket.parent_path().string());
  }
  return address;
}

int Attempt::coordinator_failed(const Status& why) {
  err_->write_message("hvrun: " + why.message() + "\n");
  start_failure_ = JobEnd{JobEndKind::kControlPlane, -1, 1, 0, why.message()};
  return 1;
}

ElasticHooks Attempt::elastic_hooks() {
  return launcher::elastic_hooks(&control_, &control_mutex_);
}

}  // namespace hvrun::launcher
