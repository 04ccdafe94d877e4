// hvrun: the launcher command. `hvrun [options] COMMAND [ARGS...]`; see README.md.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "common/logging.h"
#include "common/setting_keys.h"
#include "launcher/control_plane.h"
#include "launcher/gpu_probe.h"
#include "launcher/job_plan.h"
#include "launcher/job_runner.h"
#include "launcher/options.h"
#include "launcher/orphan_guard.h"
#include "launcher/output_mux.h"
#include "launcher/rank_environment.h"
#include "launcher/secret.h"
#include "launcher/worker_process.h"

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

int run_job(const LaunchOptions& opts) {
  const Settings& settings = opts.settings;
  auto getenv_fn = [](const char* name) { return std::getenv(name); };
  if (Status s = logging::init("hvrun", settings.get(setting::kLogLevel)); !s.is_ok())
    return fail(s.message());

  spdlog::debug("hvrun started");
  auto path = resolve_command(opts.command[0], std::getenv("PATH"));
  if (!path.is_ok()) return fail(path.status().message());

  // Forked while hvrun still has one thread: before the GPU driver (whose initialisation may
  // start threads) and the coordinator (gRPC's threads) are loaded.
  auto guard = OrphanGuard::start();
  if (!guard.is_ok()) return fail(guard.status().message());
  spdlog::debug("orphan guard started (pid {})", guard->pid());

  const std::string device = settings.get(setting::kDevice);
  GpuInventory gpus;
  if (device == "cpu") gpus.source = "--device cpu";
  else gpus = probe_gpus(getenv_fn);

  auto plan = plan_job(opts, gpus, device, LocalHostNames::of_this_machine());
  if (!plan.is_ok()) return fail(plan.status().message());
  for (const std::string& note : plan->notes) std::cerr << "hvrun: " << note << "\n";

  const Environment inherited = current_process_environment();
  NcclTuning nccl = decide_nccl(*plan, settings.get(setting::kNcclP2p), inherited,
                                driver_peer_access_probe());

  auto secret = random_hex(32);
  if (!secret.is_ok()) return fail(secret.status().message());
  auto job_suffix = random_hex(4);
  if (!job_suffix.is_ok()) return fail(job_suffix.status().message());
  const std::string job_id = "hvrun-" + *job_suffix;

  spdlog::debug("job planned");

  OpenLine terminal_line;  // one cursor when stdout and stderr are the same terminal or file
  const bool one_file = same_file(1, 2);
  OutputSink out = one_file ? OutputSink(1, terminal_line) : OutputSink(1);
  OutputSink err = one_file ? OutputSink(2, terminal_line) : OutputSink(2);
  std::unique_ptr<ControlPlane> control;
  JobRunnerConfig config;
  config.command_path = *path;
  config.argv = opts.command;
  config.grace_period = std::chrono::milliseconds(
      static_cast<int64_t>(settings.get(setting::kGracePeriodSeconds) * 1000.0));
  config.output_dir = settings.get(setting::kOutputFilename);
  config.verbose = settings.get(setting::kVerbose);
  config.tag_output = settings.get(setting::kTagOutput);
  config.abort_control_plane = [&control](const std::string& reason, int rank,
                                          const std::string& host) {
    if (control) control->abort(reason, rank, host);
  };
  JobRunner runner(std::move(config), out, err, &*guard);

  ControlPlaneEvents events;
  events.on_failure = [&runner](const std::string& message, int rank) {
    runner.post_control_plane_failure(message, rank);
  };
  events.on_note = [&runner](const std::string& message) { runner.post_note(message); };
  auto started = start_control_plane(settings, *plan, *secret, job_id, std::move(events));
  if (!started.is_ok()) {
    guard->release();
    std::cerr << "hvrun: " << started.status().message() << "\n";
    return 1;
  }
  control = std::move(started).value();
  spdlog::debug("coordinator started on {}", control->address());
  if (control->address().rfind("unix:", 0) == 0) guard->remove_on_exit(control->address().substr(5));

  JobIdentity identity;
  identity.coordinator_address = control->address();
  identity.secret = *secret;
  identity.job_id = job_id;
  std::vector<Environment> envs;
  std::vector<WorkerLaunch> launches;
  for (const RankSlot& slot : plan->ranks) {
    envs.push_back(rank_environment(*plan, slot.rank, identity, settings, nccl, inherited));
    launches.push_back(WorkerLaunch{slot.rank, slot.host, to_envp(envs.back())});
  }
  if (settings.get(setting::kVerbose))
    print_verbose_plan(err, *plan, nccl, identity.coordinator_address, job_id, envs, inherited);

  int code = runner.run(launches);
  spdlog::debug("job over (exit code {}); stopping the coordinator", code);
  control->shutdown();
  guard->release();
  spdlog::debug("done");
  return code;
}

}  // namespace
}  // namespace hvrun::launcher

int main(int argc, char** argv) {
  using namespace hvrun::launcher;
  ::signal(SIGPIPE, SIG_IGN);  // a closed terminal or pipe must not kill the job's supervisor
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = parse_command_line(args, [](const char* name) { return std::getenv(name); });
  if (!parsed.is_ok()) return fail(parsed.status().message());
  const LaunchOptions& opts = *parsed;
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
