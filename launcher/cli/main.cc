// hvrun: the launcher command. `hvrun [options] COMMAND [ARGS...]`; see docs/launcher.md.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autopsy/report_files.h"
#include "common/build_info.h"
#include "common/horovod_variables.h"
#include "common/logging.h"
#include "common/setting_keys.h"
#include "coordinator/metrics/metrics_server.h"
#include "coordinator/telemetry/timeline_reader.h"
#include "launcher/autopsy/autopsy_reporter.h"
#include "launcher/autopsy/dump_command.h"
#include "launcher/autopsy/report_directory_card.h"
#include "launcher/control/control_plane.h"
#include "launcher/doctor/doctor_command.h"
#include "launcher/elastic/elastic_options.h"
#include "launcher/elastic/elastic_runner.h"
#include "launcher/plan/env_forwarding.h"
#include "launcher/estimate/estimate_command.h"
#include "launcher/plan/gpu_probe.h"
#include "launcher/plan/job_plan.h"
#include "launcher/supervisor/job_runner.h"
#include "launcher/remote/agent.h"
#include "launcher/remote/multi_host_job.h"
#include "launcher/remote/placement.h"
#include "launcher/options/options.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/process/output_mux.h"
#include "launcher/plan/rank_environment.h"
#include "launcher/cli/restart_policy.h"
#include "launcher/plan/secret.h"
#include "launcher/plan/slurm_allocation.h"
#include "launcher/mpi/mpi_handoff.h"
#include "launcher/process/shm_cleanup.h"
#include "launcher/telemetry/telemetry_hub.h"
#include "launcher/telemetry/telemetry_summary.h"
#include "launcher/process/worker_process.h"

namespace hvrun::launcher {
namespace {

constexpr int kUsageError = 2;

int fail(const std::string& message) {
  std::cerr << "hvrun: " << message << "\n";
  return kUsageError;
}

void print_verbose_plan(OutputSink& err, const JobPlan& plan, const NcclTuning& nccl,
                        const std::string& coordinator_address, const std::string& job_id,
                        const std::vector<Environment>& envs, const Environment& inherited) {
  std::string text = "hvrun: job " + job_id + ": " + std::to_string(plan.size) + " rank" +
                     (plan.size == 1 ? "" : "s") + " on " + plan.ranks.at(0).host + ", " +
                     (plan.gpu_job ? "GPU job (" + plan.gpus.source + ")" : "CPU job") +
                     ", coordinator " +
                     (coordinator_address.empty() ? "not available" : coordinator_address) + "\n";
  for (const std::string& reason : nccl.reasons) text += "hvrun: NCCL: " + reason + "\n";
  for (size_t r = 0; r < envs.size(); ++r) {
    text += "hvrun: rank " + std::to_string(r) + " environment:";
    for (const auto& [key, value] : describe_additions(envs[r], inherited))
      text += " " + key + "=" + value;
    text += "\n";
  }
  err.write_message(text);
}

// One attempt of a job whose children run on this host: a fresh coordinator, secret and job id,
// then the workers (or, with `mpi`, the one mpirun that starts them), their end. How it ended
// goes to `end` when it failed.
int run_local_attempt(const LaunchOptions& opts, const JobPlan& plan,
                      const std::string& command_path, const MpiHandoff* mpi, OrphanGuard& guard,
                      JobEnd* end, TelemetryHub* telemetry) {
  const Settings& settings = opts.settings;
  const Environment session = current_process_environment();
  std::vector<std::string> export_notes;
  // What every rank starts from: hvrun's environment with the -x variables applied.
  const Environment inherited = with_exports(session, session, opts.exports, &export_notes);
  NcclTuning nccl = decide_nccl(plan, settings.get(setting::kNcclP2p), inherited,
                                driver_peer_access_probe());

  auto secret = random_hex(32);
  if (!secret.is_ok()) return fail(secret.status().message());
  auto job_suffix = random_hex(4);
  if (!job_suffix.is_ok()) return fail(job_suffix.status().message());
  const std::string job_id = "hvrun-" + *job_suffix;
  guard.sweep_on_exit(kShmDirectory, shm_segment_prefix(job_id));  // shared-memory data plane

  spdlog::debug("job planned");

  OpenLine terminal_line;  // one cursor when stdout and stderr are the same terminal or file
  const bool one_file = same_file(1, 2);
  OutputSink out = one_file ? OutputSink(1, terminal_line) : OutputSink(1);
  OutputSink err = one_file ? OutputSink(2, terminal_line) : OutputSink(2);
  for (const std::string& note : export_notes) err.write_message("hvrun: " + note + "\n");
  // The coordinator; set by whichever thread starts it, read by the runner's abort hook.
  std::mutex control_mutex;
  std::unique_ptr<ControlPlane> control;
  JobRunnerConfig config;
  config.command_path = mpi ? mpi->mpirun_path : command_path;
  config.argv = mpi ? mpi->argv : opts.command;
  config.grace_period = std::chrono::milliseconds(
      static_cast<int64_t>(settings.get(setting::kGracePeriodSeconds) * 1000.0));
  config.output_dir = settings.get(setting::kOutputFilename);
  config.verbose = settings.get(setting::kVerbose);
  // mpirun tags its ranks' lines itself (--tag-output).
  config.tag_output = mpi == nullptr && settings.get(setting::kTagOutput);
  config.output_timestamps = settings.get(setting::kOutputTimestamps);
  EarlyExits early_exits;  // guarded by control_mutex
  config.coordinator = coordinator_hooks(&control, &control_mutex, &early_exits);
  // mpirun's exit is not any rank's: the coordinator learns of the ranks' ends from their streams.
  if (mpi) config.coordinator.worker_exited = nullptr;
  auto elastic = elastic_options(settings, plan.size);
  if (!elastic.is_ok()) return fail(elastic.status().message());
  JobIdentity identity;  // filled once the coordinator's address is known
  std::vector<Environment> envs;
  // Elastic jobs: a lost rank ends only the membership (launcher/elastic/).
  std::unique_ptr<JobRunner> plain;
  std::unique_ptr<ElasticRunner> elastic_runner;
  if (elastic->enabled && !mpi) {
    ElasticRunnerConfig ec;
    static_cast<SupervisedJobConfig&>(ec) = config;
    ec.command_path = config.command_path;
    ec.argv = config.argv;
    ec.elastic = *elastic;
    // Membership ranks renumber at each reset: the launch-time rank of an exit means nothing to
    // a later membership, and the membership change says what was lost.
    ec.coordinator.worker_exited = nullptr;
    ec.environment = [&](int id, const ElasticSlot& slot) {
      Environment env = rank_environment(plan_with_rank(plan, id, slot.host, slot.local_rank), id,
                                         identity, settings, nccl, inherited);
      put_elastic_environment(*elastic, env);
      return to_envp(env);
    };
    ec.hooks = elastic_hooks(&control, &control_mutex);
    elastic_runner = std::make_unique<ElasticRunner>(std::move(ec), out, err, &guard);
  } else {
    plain = std::make_unique<JobRunner>(std::move(config), out, err, &guard);
  }
  SupervisedJob& runner = plain ? static_cast<SupervisedJob&>(*plain) : *elastic_runner;
  // /metrics and the end-of-job summary read this attempt's coordinator (null until it started).
  ScopedTelemetrySource telemetry_source(telemetry, [&control, &control_mutex] {
    std::lock_guard<std::mutex> lock(control_mutex);
    return control ? control->telemetry() : JobTelemetry{};
  });

  ControlPlaneEvents events;
  events.on_failure = [&runner](const std::string& message, int rank) {
    runner.post_control_plane_failure(message, rank);
  };
  events.on_note = [&runner](const std::string& message) { runner.post_note(message); };
  const AutopsyReporting autopsy_reporting{
      autopsy_directory(settings.get(setting::kAutopsyDir), settings.get(setting::kOutputFilename)),
      mpi == nullptr};  // mpirun's ranks may run on other hosts
  events.on_autopsy = [&runner, &err, autopsy_reporting](
                          std::shared_ptr<const v1::AutopsyJobReport> report) {
    runner.post_task([&err, autopsy_reporting, report] {
      report_autopsy(*report, autopsy_reporting, err);
    });
  };

  // With a unix socket its address is known now: the coordinator starts on a thread of its own
  // while the workers start (about a tenth of a short job's launch time); otherwise first.
  // Ranks on other hosts (mpirun's) reach the coordinator over TCP on the interface named.
  const std::string listen_on = mpi ? mpi->listen_on : "";
  std::string address = listen_on.empty() ? predictable_unix_address(settings, job_id) : "";
  std::thread starter;
  auto start = [&, events = std::move(events)]() mutable -> Status {
    auto started = start_control_plane(settings, plan, *secret, job_id, std::move(events),
                                       address.empty() ? listen_on : address);
    if (started.is_ok() && !address.empty() && (*started)->address() != address)
      started = internal_error("the coordinator listens on " + (*started)->address() +
                               ", not on " + address + " where the workers were sent");
    if (!started.is_ok()) return started.status();
    spdlog::debug("coordinator started on {}", (*started)->address());
    std::lock_guard<std::mutex> lock(control_mutex);
    control = std::move(started).value();
    replay_early_exits(*control, early_exits);
    return Status::ok();
  };
  if (address.empty()) {
    if (Status s = start(); !s.is_ok()) {
      std::cerr << "hvrun: " << s.message() << "\n";
      *end = JobEnd{JobEndKind::kControlPlane, -1, 1, 0, s.message()};
      return 1;
    }
    address = control->address();
  } else {
    starter = std::thread([&runner, start = std::move(start)]() mutable {
      if (Status s = start(); !s.is_ok())
        runner.post_control_plane_failure("the coordinator did not start: " + s.message(), -1);
    });
  }
  if (address.rfind("unix:", 0) == 0) {  // the socket, then its private directory
    const std::filesystem::path socket = address.substr(5);
    guard.remove_on_exit(socket.string());
    guard.remove_on_exit(socket.parent_path().string());
  }

  identity.coordinator_address = address;
  identity.secret = *secret;
  identity.job_id = job_id;
  std::vector<WorkerLaunch> launches;
  if (mpi) {
    // mpirun exports these to every rank by name (MpiHandoff::argv).
    Environment env = inherited;
    for (const auto& [key, value] : settings.non_default_environment()) env[key] = value;
    for (const auto& [key, value] : mpi->network) env[key] = value;
    env["HVRUN_COORDINATOR_ADDR"] = identity.coordinator_address;
    env["HVRUN_SECRET"] = identity.secret;
    env["HVRUN_JOB_ID"] = identity.job_id;
    launches.push_back(WorkerLaunch{0, "localhost", to_envp(env), "mpirun"});
    if (settings.get(setting::kVerbose)) {
      std::string line = "hvrun: --mpi:";
      for (const std::string& word : mpi->argv) line += " " + word;
      err.write_message(line + "\n");
    }
  }
  for (const RankSlot& slot : mpi ? std::vector<RankSlot>{} : plan.ranks) {
    envs.push_back(rank_environment(plan, slot.rank, identity, settings, nccl, inherited));
    launches.push_back(WorkerLaunch{slot.rank, slot.host, to_envp(envs.back())});
  }
  if (settings.get(setting::kVerbose) && !mpi)
    print_verbose_plan(err, plan, nccl, identity.coordinator_address, job_id, envs, session);

  int code = 0;
  if (elastic_runner) {
    std::vector<ElasticSlot> first;
    for (const RankSlot& slot : plan.ranks) first.push_back({slot.host, slot.local_rank});
    code = elastic_runner->run(first);
  } else {
    code = plain->run(launches);
  }
  if (starter.joinable()) starter.join();
  spdlog::debug("job over (exit code {}); stopping the coordinator", code);
  std::optional<Status> final_status;
  std::optional<CoordinatorVerdict> cause;
  {
    std::lock_guard<std::mutex> lock(control_mutex);
    if (control) {
      final_status = control->final_status();
      cause = control->verdict();
      control->shutdown();
    }
  }
  if (auto e = runner.end()) *end = *e;
  // The runner's loop ends with the last rank's exit: when every rank exits 0 right after the
  // coordinator aborted the job, its report may not have reached the loop. The coordinator's
  // word stands.
  if (code == 0 && final_status && !final_status->is_ok() &&
      final_status->code() != StatusCode::kCancelled) {
    const std::string message =
        (final_status->code() == StatusCode::kAborted ? "job aborted: " : "coordinator: ") +
        final_status->message();
    err.write_message("hvrun: job failed: " + message + "\n");
    *end = JobEnd{JobEndKind::kControlPlane, cause ? cause->rank : -1, 1, 0, message};
    code = 1;
  }
  return code;
}

// Inside a Slurm allocation, a job given no -H or --hostfile runs on the allocation's nodes.
Result<LaunchOptions> with_slurm_hosts(const LaunchOptions& opts) {
  auto getenv_fn = [](const char* name) { return std::getenv(name); };
  HVRUN_RETURN_IF_ERROR(refuse_many_launchers_in_one_step(getenv_fn));
  if (opts.settings.get(setting::kRemoteLauncher) == "srun" && !std::getenv("SLURM_JOB_ID"))
    return invalid_argument(
        "--remote-launcher srun needs a Slurm allocation (SLURM_JOB_ID is not set): run hvrun "
        "inside salloc or sbatch, or use --remote-launcher ssh");
  if (!opts.hosts.empty()) return opts;
  auto read = slurm_allocation(getenv_fn);
  if (!read.is_ok())
    return invalid_argument(read.status().message() + "; or give the hosts with -H or --hostfile");
  const std::optional<SlurmAllocation>& allocation = *read;
  if (!allocation) return opts;
  LaunchOptions job = opts;
  std::vector<std::string> notes;
  HVRUN_ASSIGN_OR_RETURN(job.hosts, slurm_job_hosts(*allocation, opts.num_proc, &notes));
  for (const std::string& note : notes) std::cerr << "hvrun: " << note << "\n";
  return job;
}

int run_job(const LaunchOptions& given) {
  auto job_options = with_slurm_hosts(given);
  if (!job_options.is_ok()) return fail(job_options.status().message());
  const LaunchOptions& opts = *job_options;
  const Settings& settings = opts.settings;
  auto getenv_fn = [](const char* name) { return std::getenv(name); };
  if (Status s = logging::init("hvrun", settings.get(setting::kLogLevel),
                                settings.get(setting::kLogTimestamps)); !s.is_ok())
    return fail(s.message());

  spdlog::debug("hvrun started");
  auto path = resolve_command(opts.command[0], std::getenv("PATH"));
  if (!path.is_ok()) return fail(path.status().message());

  // Forked while hvrun still has one thread: before the GPU driver (whose initialisation may
  // start threads) and the coordinator (gRPC's threads) are loaded.
  auto guard = OrphanGuard::start();
  if (!guard.is_ok()) return fail(guard.status().message());
  spdlog::debug("orphan guard started (pid {})", guard->pid());
  // `hvrun dump <this pid>` finds the reports where this job writes them.
  const ReportDirectoryCard report_card(
      autopsy_directory(settings.get(setting::kAutopsyDir), settings.get(setting::kOutputFilename)));
  if (!report_card.path().empty()) guard->remove_on_exit(report_card.path());

  const std::string device = settings.get(setting::kDevice);
  GpuInventory gpus;
  if (device == "cpu") gpus.source = "--device cpu";
  else gpus = probe_gpus(getenv_fn);

  auto plan = plan_job(opts, gpus, device, LocalHostNames::of_this_machine());
  if (!plan.is_ok()) return fail(plan.status().message());
  for (const std::string& note : plan->notes) std::cerr << "hvrun: " << note << "\n";
  std::optional<MpiHandoff> mpi;  // --mpi: mpirun starts the ranks (launcher/mpi/mpi_handoff.h)
  if (settings.get(setting::kMpi)) {
    const Environment session = current_process_environment();
    auto handoff =
        plan_mpi_handoff(opts, *plan, with_exports(session, session, opts.exports, nullptr));
    if (!handoff.is_ok()) return fail(handoff.status().message());
    mpi = std::move(handoff).value();
  }
  // One /metrics endpoint for the whole run, across restart attempts (off unless --metrics-port).
  TelemetryHub telemetry;
  std::unique_ptr<coordinator::metrics::MetricsServer> metrics;
  if (const int64_t port = settings.get(setting::kMetricsPort); port >= 0) {
    auto started = coordinator::metrics::MetricsServer::start(
        {settings.get(setting::kMetricsAddress), static_cast<int>(port)},
        [&telemetry] { return telemetry.snapshot(); });
    if (!started.is_ok()) return fail(started.status().message());
    metrics = std::move(started).value();
    std::cerr << "hvrun: metrics at " << metrics->url() << "\n";
  }
  auto elastic = elastic_options(settings, plan->size);
  if (!elastic.is_ok()) {
    return fail(elastic.status().message());
  } else if (elastic->enabled && mpi) {
    return fail("elastic jobs (--min-np, --max-np, --host-discovery-script) cannot run under "
                "--mpi: mpirun ends every rank when one fails; leave one or the other out");
  } else if (elastic->enabled && settings.get(setting::kMaxRestarts) > 0) {
    return fail("--max-restarts restarts every rank; an elastic job replaces lost ranks instead: "
                "give one or the other");
  }
  // Where the ranks start is decided once, here (launcher/remote/placement.h).
  const bool through_agents = starts_through_agents(*plan, *elastic, mpi.has_value());
  if (through_agents) *plan = plan_for_agents(*plan);
  RestartPolicy restarts(static_cast<int>(settings.get(setting::kMaxRestarts)));
  for (int attempt = 0;; ++attempt) {
    // Workers (local, and remote through the forwarded environment) see which attempt this is.
    ::setenv("HVRUN_RESTART_COUNT", std::to_string(attempt).c_str(), 1);
    const auto started_at = std::chrono::steady_clock::now();
    AttemptOutcome outcome;
    outcome.exit_code =
        through_agents  // an agent on every host (launcher/remote/multi_host_job.h)
            ? run_multi_host_job(opts, *plan, &*guard, &outcome.end, &telemetry)
            : run_local_attempt(opts, *plan, *path, mpi ? &*mpi : nullptr, *guard, &outcome.end,
                                &telemetry);
    outcome.ran_for = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started_at);
    RestartPolicy::Decision decision = restarts.after_attempt(outcome);
    if (!decision.message.empty()) std::cerr << "hvrun: " << decision.message << "\n";
    telemetry.set_restarts(restarts.restarts_done());
    if (decision.restart) continue;
    if (restarts.restarts_done() > 0) {
      std::cerr << "hvrun: the job " << (outcome.exit_code == 0 ? "succeeded" : "failed")
                << " after " << restarts.restarts_done() << " restart(s):\n";
      for (const std::string& line : restarts.restart_log()) std::cerr << "hvrun:   " << line << "\n";
    }
    if (settings.get(setting::kSummary)) std::cerr << format_telemetry_summary(telemetry.snapshot());
    if (metrics) metrics->stop();
    guard->release();
    spdlog::debug("done");
    return outcome.exit_code;
  }
}

}  // namespace
}  // namespace hvrun::launcher

int main(int argc, char** argv) {
  using namespace hvrun::launcher;
  ::signal(SIGPIPE, SIG_IGN);  // a closed terminal or pipe must not kill the job's supervisor
  std::vector<std::string> args(argv + 1, argv + argc);
  // Subcommands with their own options: `hvrun doctor ...`, `hvrun estimate-memory ...`.
  if (!args.empty() && args[0] == "doctor")
    return hvrun::doctor::run_doctor_main({args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "estimate-memory")
    return hvrun::estimate::run_estimate_memory({args.begin() + 1, args.end()}, std::cout, std::cerr);
  if (!args.empty() && args[0] == "timeline-check")  // reads a --timeline-filename file
    return hvrun::coordinator::telemetry::run_timeline_check({args.begin() + 1, args.end()},
                                                             std::cout, std::cerr);
  if (!args.empty() && args[0] == "dump")  // an autopsy of a running job (launcher/autopsy/)
    return run_dump_command({args.begin() + 1, args.end()}, std::cout, std::cerr);
  if (!args.empty() && args[0] == "agent")  // started by hvrun on each host of a multi-host job
    return run_agent(std::vector<std::string>(args.begin() + 1, args.end()));
  auto parsed = parse_command_line(args, [](const char* name) { return std::getenv(name); });
  if (!parsed.is_ok()) return fail(parsed.status().message());
  const LaunchOptions& opts = *parsed;
  if (!opts.show_help && !opts.show_version) {
    for (const std::string& note : opts.notes) std::cerr << "hvrun: note: " << note << "\n";
    for (const std::string& note : opts.settings.notes())
      std::cerr << "hvrun: note: " << note << "\n";
    if (const std::string warning = hvrun::unknown_horovod_variables_warning(); !warning.empty())
      std::cerr << "hvrun: warning: " << warning << "\n";
  }
  if (opts.show_help) {
    std::cout << usage_text();
    return 0;
  }
  if (opts.show_version) {
    std::cout << "hvrun " << hvrun::build_info().version << "\n";
    return 0;
  }
  if (opts.check_build) {
    std::cout << hvrun::describe_build();
    return 0;
  }
  if (opts.print_config) {
    opts.settings.print(std::cout);
    return 0;
  }
  if (opts.command.empty()) return fail("no command given (usage: hvrun [options] COMMAND [ARGS...])");
  return run_job(opts);
}
