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
#include "launcher/attempt/attempt.h"
#include "launcher/attempt/local_processes.h"
#include "launcher/attempt/placement_choice.h"
#include "launcher/autopsy/dump_command.h"
#include "launcher/autopsy/report_directory_card.h"
#include "launcher/cli/restart_policy.h"
#include "launcher/doctor/child_process.h"
#include "launcher/doctor/doctor_command.h"
#include "launcher/elastic/elastic_options.h"
#include "launcher/estimate/estimate_command.h"
#include "launcher/health/health_command.h"
#include "launcher/mpi/mpi_handoff.h"
#include "launcher/mpi/mpirun_processes.h"
#include "launcher/options/options.h"
#include "launcher/plan/env_forwarding.h"
#include "launcher/plan/gpu_probe.h"
#include "launcher/plan/job_plan.h"
#include "launcher/plan/slurm_allocation.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/remote/agent.h"
#include "launcher/remote/remote_agents.h"
#include "launcher/remote/remote_health.h"
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
    return fail("elastic jobs (--min-np, --max-np, --host-discovery-script, --spares) cannot "
                "run under --mpi: mpirun ends every rank when one fails; leave one or the other "
                "out");
  } else if (elastic->spares > 0 && elastic->discovery_script.empty() && plan->multi_host) {
    return fail("--spares " + std::to_string(elastic->spares) +
                " on several hosts needs --host-discovery-script: spares start on the slots it "
                "lists beyond the ranks (on one host they start with the job, in the next local "
                "ranks)");
  } else if (elastic->enabled && settings.get(setting::kMaxRestarts) > 0) {
    return fail("--max-restarts restarts every rank; an elastic job replaces lost ranks instead: "
                "give one or the other");
  }
  // Every host is checked before any rank starts (an elastic job may go on without some).
  if (const RemoteHealth health = remote_health(settings, hvrun::doctor::self_executable());
      health.options.enabled) {
    std::vector<std::string> said;
    auto replan = screen_hosts_at_start(*plan, health, *elastic, *job_options, &said);
    for (const std::string& line : said) std::cerr << "hvrun: health check: " << line << "\n";
    if (!replan.is_ok()) {
      std::cerr << "hvrun: " << replan.status().message() << "\n";
      return 1;  // as a failed pre-flight check of the hosts: the job did not start
    }
    if (*replan) {
      plan = plan_job(opts, gpus, device, LocalHostNames::of_this_machine());
      if (!plan.is_ok()) return fail(plan.status().message());
      elastic = elastic_options(settings, plan->size);
      if (!elastic.is_ok()) return fail(elastic.status().message());
    }
  }
  // Where the ranks start is decided once, here (launcher/attempt/placement_choice.h).
  const PlacementKind where = choose_placement(*plan, *elastic, mpi.has_value());
  if (where == PlacementKind::kRemoteAgents) *plan = plan_for_agents(*plan);
  RestartPolicy restarts(static_cast<int>(settings.get(setting::kMaxRestarts)));
  for (int attempt = 0;; ++attempt) {
    // Workers (local, and remote through the forwarded environment) see which attempt this is.
    ::setenv("HVRUN_RESTART_COUNT", std::to_string(attempt).c_str(), 1);
    const auto started_at = std::chrono::steady_clock::now();
    Attempt this_attempt(opts, *plan, *elastic, *guard, &telemetry);  // outlives its placement
    std::unique_ptr<Placement> placement;
    if (where == PlacementKind::kRemoteAgents)  // an agent on every host
      placement = std::make_unique<RemoteAgents>();
    else if (where == PlacementKind::kMpirun)
      placement = std::make_unique<MpirunProcesses>(*mpi);
    else
      placement = std::make_unique<LocalProcesses>(*path);
    AttemptOutcome outcome;
    outcome.exit_code = this_attempt.run(*placement, &outcome.end);
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
  if (!args.empty() && args[0] == "health-check")  // run by hvrun on each host it checks
    return run_health_check_command({args.begin() + 1, args.end()}, std::cout, std::cerr);
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
