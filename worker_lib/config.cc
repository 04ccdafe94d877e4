// The worker library's settings from the environment, read in one place: Config::
// from_environment (the variables hvrun sets for every worker, see docs/launcher.md),
// detail::apply_tuning_from_environment and CheckpointOptions::from_environment.
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "common/ipv4_interfaces.h"
#include "common/horovod_variables.h"
#include "common/setting_keys.h"
#include "common/settings.h"
#include "worker_lib/config_environment.h"
#include "hvrun/checkpoint.h"
#include "hvrun/hvrun.h"

namespace hvrun {
namespace {

const char* env(const char* name) { return std::getenv(name); }

Result<int> int_from_env(const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long parsed = std::strtol(v, &end, 10);
  if (*end != '\0' || parsed < -1 || parsed > 1000000)
    return invalid_argument(std::string(name) + "='" + v + "' is not a valid rank or count");
  return static_cast<int>(parsed);
}

// The first of `names` that is set, read as a rank or count; `fallback` when none is. Launchers
// other than hvrun (mpirun, srun, PMI launchers) say a worker's rank in their own variables:
// hvrun's name comes first, so a worker hvrun started inside such a launcher's task (an srun step
// running hvrun's agent) keeps the rank hvrun gave it.
Result<int> int_from_first(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    const char* v = env(name);
    if (v != nullptr && *v != '\0') return int_from_env(name, fallback);
  }
  return fallback;
}

std::chrono::milliseconds seconds_to_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0));
}

void apply_tuning(const Settings& settings, Config& config) {
  config.cpu_backend.backend = settings.get(setting::kCpuBackend);
  config.cpu_backend.hierarchical = settings.get(setting::kHierarchicalAllreduce);
  config.cpu_backend.shm_chunk_bytes = static_cast<size_t>(settings.get(setting::kShmChunkKb))
                                       << 10;
  config.device_plane = settings.get(setting::kDevicePlane);
  config.fast_path.enabled = settings.get(setting::kFastPath);
  config.fast_path.wait =
      std::chrono::duration<double, std::milli>(settings.get(setting::kFastPathWaitMs));
  config.telemetry.flight_recorder_size =
      static_cast<size_t>(settings.get(setting::kFlightRecorderSize));
  if (const char* visible = env("CUDA_VISIBLE_DEVICES"))
    config.telemetry.cuda_visible_devices = visible;
}

// A launcher hvrun does not follow started several ranks (mpirun, srun): running each as a
// job of size 1 would train N unrelated models, so init() refuses instead. The variable and its
// count, or nullopt.
std::optional<std::pair<std::string, long>> foreign_launcher_world() {
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = env(name);
    const long ranks = v != nullptr ? std::strtol(v, nullptr, 10) : 0;
    if (ranks > 1) return std::make_pair(std::string(name), ranks);
  }
  return std::nullopt;
}

}  // namespace

Result<Config> Config::from_environment() {
  Config config;
  const char* address = env("HVRUN_COORDINATOR_ADDR");
  if (address == nullptr || *address == '\0') {
    if (auto world = foreign_launcher_world())
      return failed_precondition(
          "HVRUN_COORDINATOR_ADDR is not set, but another launcher started " +
          std::to_string(world->second) + " ranks (" + world->first + "=" +
          std::to_string(world->second) + "): start hvrun-coordinator --world-size " +
          std::to_string(world->second) +
          " and give every rank HVRUN_COORDINATOR_ADDR and HVRUN_SECRET "
          "(docs/coordinator.md), or start the job with hvrun");
    config.private_coordinator = true;
  } else {
    config.coordinator_address = address;
  }
  if (const char* secret = env("HVRUN_SECRET")) config.secret = secret;
  // A job id names the launcher's job; a private coordinator makes its own.
  if (const char* job = env("HVRUN_JOB_ID"); job && !config.private_coordinator) config.job_id = job;
  HVRUN_ASSIGN_OR_RETURN(config.requested_rank,
                         int_from_first({"HVRUN_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                         "PMI_RANK", "SLURM_PROCID"},
                                        -1));
  HVRUN_ASSIGN_OR_RETURN(config.local_rank,
                         int_from_first({"HVRUN_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "MPI_LOCALRANKID", "SLURM_LOCALID"},
                                        -1));
  if (const char* host = env("HVRUN_HOST")) config.host = host;
  if (const char* data = env("HVRUN_DATA_ADDR"); data && *data) {
    config.data_address = data;
  } else {
    // Started by another launcher: Gloo's own variable (Horovod's name too) picks the interface.
    for (const char* variable : {"GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE"}) {
      const char* names = env(variable);
      if (names == nullptr || *names == '\0') continue;
      HVRUN_ASSIGN_OR_RETURN(config.data_address,
                             address_of_named_interface(variable, names, list_ipv4_interfaces()));
      break;
    }
  }

  Settings settings;
  HVRUN_RETURN_IF_ERROR(settings.apply_process_environment());
  config.start_timeout = seconds_to_ms(settings.get(setting::kStartTimeoutSeconds));
  if (const char* elastic = env("HVRUN_ELASTIC")) config.elastic = std::string(elastic) == "1";
  if (const char* spare = env("HVRUN_ELASTIC_SPARE")) config.spare = std::string(spare) == "1";
  if (const char* watch = env("HVRUN_DEATH_WATCH")) config.death_watch = watch;
  config.elastic_timeout = seconds_to_ms(settings.get(setting::kElasticTimeoutSeconds));
  config.op_timeout = seconds_to_ms(settings.get(setting::kOpTimeoutSeconds));
  config.log_level = settings.get(setting::kLogLevel);
  config.log_timestamps = settings.get(setting::kLogTimestamps);
  // hvrun printed these for the whole job when it started this rank (HVRUN_JOB_ID is its).
  if (env("HVRUN_JOB_ID") == nullptr) {
    config.environment_notes = settings.notes();
    config.environment_warning = unknown_horovod_variables_warning();
  }
  apply_tuning(settings, config);
  return config;
}

Status detail::apply_tuning_from_environment(Config& config) {
  Settings settings;
  HVRUN_RETURN_IF_ERROR(settings.apply_process_environment());
  apply_tuning(settings, config);
  return Status::ok();
}

std::string detail::executable_search_path() {
  const char* path = env("PATH");
  return path != nullptr ? path : "";
}

Result<CheckpointOptions> CheckpointOptions::from_environment() {
  Settings settings;
  HVRUN_RETURN_IF_ERROR(settings.apply_process_environment());
  CheckpointOptions options;
  options.directory = settings.get(setting::kCheckpointDir);
  options.every = settings.get(setting::kCheckpointEvery);
  options.keep = static_cast<int>(settings.get(setting::kCheckpointKeep));
  options.run_name = settings.get(setting::kCheckpointName);
  return options;
}

}  // namespace hvrun
