// Horovod 0.28.1's run-time variables (horovod/common/common.h, operations.cc, utils/env_parser.cc,
// logging.cc, gloo/gloo_context.cc, runner/common/util/config_parser.py) and its build-time ones
// (setup.py, docs/install.rst). Keep docs/horovod.md's variable table in step with this list.
#include "common/horovod_variables.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>

namespace hvrun {
namespace {

using Use = HorovodVariableUse;
using Reading = HorovodReading;

constexpr std::string_view kAutotuneOnly =
    "only Horovod's autotuner reads it (HOROVOD_AUTOTUNE), and hvrun has none";

constexpr std::array kVariables = {
    HorovodVariable{"HOROVOD_FUSION_THRESHOLD", Use::kSetting, "fusion_threshold_mb",
                    Reading::kBytesToMiB},
    HorovodVariable{"HOROVOD_CYCLE_TIME", Use::kSetting, "cycle_time_ms"},
    HorovodVariable{"HOROVOD_CACHE_CAPACITY", Use::kSetting, "cache_capacity"},
    HorovodVariable{"HOROVOD_HIERARCHICAL_ALLREDUCE", Use::kSetting, "hierarchical_allreduce",
                    Reading::kFlagOnOff},
    HorovodVariable{"HOROVOD_TIMELINE", Use::kSetting, "timeline_filename",
                    Reading::kTimelinePath},
    HorovodVariable{"HOROVOD_STALL_CHECK_DISABLE", Use::kSetting, "stall_check",
                    Reading::kFlagFalse},
    HorovodVariable{"HOROVOD_STALL_CHECK_TIME_SECONDS", Use::kSetting, "stall_warning_s"},
    HorovodVariable{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", Use::kSetting, "stall_shutdown_s"},
    HorovodVariable{"HOROVOD_GLOO_TIMEOUT_SECONDS", Use::kSetting, "op_timeout_s"},
    HorovodVariable{"HOROVOD_START_TIMEOUT", Use::kSetting, "start_timeout_s"},
    HorovodVariable{"HOROVOD_LOG_LEVEL", Use::kSetting, "log_level"},
    HorovodVariable{"HOROVOD_LOG_HIDE_TIME", Use::kSetting, "log_timestamps", Reading::kFlagFalse},
    HorovodVariable{"HOROVOD_GLOO_IFACE", Use::kSetting, "network_interface"},
    HorovodVariable{"HOROVOD_CPU_OPERATIONS", Use::kSetting, "cpu_backend",
                    Reading::kCpuOperations},

    HorovodVariable{"HOROVOD_CONTROLLER", Use::kUnsupportedUnlessGloo, {}, Reading::kSame,
                    "hvrun's controller is its own coordinator, which works as Horovod's Gloo "
                    "controller does; there is no MPI controller: unset it or set it to gloo"},
    HorovodVariable{"HOROVOD_AUTOTUNE", Use::kUnsupportedWhenOn, {}, Reading::kSame,
                    "hvrun has no autotuner: set --fusion-threshold-mb and --cycle-time-ms "
                    "(HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME) instead"},
    HorovodVariable{"HOROVOD_AUTOTUNE_LOG", Use::kNoEffect, {}, Reading::kSame, kAutotuneOnly},
    HorovodVariable{"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", Use::kNoEffect, {}, Reading::kSame,
                    kAutotuneOnly},
    HorovodVariable{"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", Use::kNoEffect, {}, Reading::kSame,
                    kAutotuneOnly},
    HorovodVariable{"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", Use::kNoEffect, {}, Reading::kSame,
                    kAutotuneOnly},
    HorovodVariable{"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", Use::kNoEffect, {},
                    Reading::kSame, kAutotuneOnly},
    HorovodVariable{"HOROVOD_ELASTIC", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun makes a job elastic when it is given --min-np, --max-np or "
                    "--host-discovery-script, and tells its workers so itself (HVRUN_ELASTIC)"},
    HorovodVariable{"HOROVOD_ELASTIC_TIMEOUT", Use::kSetting, "elastic_timeout_s"},
    HorovodVariable{"HOROVOD_NUM_NCCL_STREAMS", Use::kUnsupportedUnlessOne, {}, Reading::kSame,
                    "hvrun runs NCCL on one stream per rank (Horovod's default, 1)"},
    HorovodVariable{"HOROVOD_THREAD_AFFINITY", Use::kUnsupported, {}, Reading::kSame,
                    "hvrun does not pin its background thread on its own: use --bind-to block, "
                    "which binds each rank's whole process (every thread) to its own cores"},
    HorovodVariable{"HOROVOD_HIERARCHICAL_ALLGATHER", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun's allgather is not hierarchical (shared memory on one host, Gloo "
                    "across hosts); results are the same"},
    HorovodVariable{"HOROVOD_TORUS_ALLREDUCE", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun's NCCL allreduce runs on one communicator over all ranks and NCCL "
                    "picks ring or tree itself; results are the same"},
    HorovodVariable{"HOROVOD_TIMELINE_MARK_CYCLES", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun's timeline always marks every negotiation cycle that made a plan "
                    "(the coordinator's 'plan' markers)"},
    HorovodVariable{"HOROVOD_MPI_THREADS_DISABLE", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun never initialises MPI"},
    HorovodVariable{"HOROVOD_BATCH_D2D_MEMCOPIES", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun always packs GPU fusion buffers with its batched copy kernels"},
    HorovodVariable{"HOROVOD_DISABLE_GROUP_FUSION", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun negotiates and fuses each group as one response of its own; results "
                    "are the same"},
    HorovodVariable{"HOROVOD_ENABLE_ASYNC_COMPLETION", Use::kNoEffect, {}, Reading::kSame,
                    "TensorFlow only, and hvrun has no TensorFlow binding"},
    HorovodVariable{"HOROVOD_ENABLE_XLA_OPS", Use::kNoEffect, {}, Reading::kSame,
                    "TensorFlow only, and hvrun has no TensorFlow binding"},
    HorovodVariable{"HOROVOD_DISABLE_NVTX_RANGES", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun emits no NVTX ranges"},
    HorovodVariable{"HOROVOD_ADASUM_MPI_CHUNK_SIZE", Use::kNoEffect, {}, Reading::kSame,
                    "only Horovod's MPI Adasum reads it, and hvrun has no Adasum"},
    HorovodVariable{"HOROVOD_CCL_CACHE", Use::kNoEffect, {}, Reading::kSame,
                    "oneCCL only, and hvrun has no oneCCL data plane"},
    HorovodVariable{"HOROVOD_DYNAMIC_PROCESS_SETS", Use::kNoEffect, {}, Reading::kSame,
                    "hvrun always allows add_process_set and remove_process_set after init"},
    HorovodVariable{"HOROVOD_SPARK_START_TIMEOUT", Use::kNoEffect, {}, Reading::kSame,
                    "read by hvrun.spark.run on the Spark driver (its start_timeout), not by "
                    "hvrun or its ranks"},
    HorovodVariable{"HOROVOD_SPARK_USE_LOCAL_RANK_GPU_INDEX", Use::kNoEffect, {}, Reading::kSame,
                    "horovod.spark's estimators only; hvrun pins local rank k to GPU k anyway"},

    HorovodVariable{"HOROVOD_RANK", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_SIZE", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_LOCAL_RANK", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_LOCAL_SIZE", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_CROSS_RANK", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_CROSS_SIZE", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_HOSTNAME", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_GLOO_RENDEZVOUS_ADDR", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_GLOO_RENDEZVOUS_PORT", Use::kSetByLauncher},
    HorovodVariable{"HOROVOD_SECRET_KEY", Use::kSetByLauncher},

    HorovodVariable{"HOROVOD_WITH_", Use::kBuildTime},     // HOROVOD_WITH_PYTORCH, ...
    HorovodVariable{"HOROVOD_WITHOUT_", Use::kBuildTime},  // HOROVOD_WITHOUT_MPI, ...
    HorovodVariable{"HOROVOD_GPU", Use::kBuildTime},
    HorovodVariable{"HOROVOD_GPU_OPERATIONS", Use::kBuildTime},
    HorovodVariable{"HOROVOD_GPU_ALLREDUCE", Use::kBuildTime},
    HorovodVariable{"HOROVOD_GPU_ALLGATHER", Use::kBuildTime},
    HorovodVariable{"HOROVOD_GPU_BROADCAST", Use::kBuildTime},
    HorovodVariable{"HOROVOD_GPU_ALLTOALL", Use::kBuildTime},
    HorovodVariable{"HOROVOD_GPU_REDUCESCATTER", Use::kBuildTime},
    HorovodVariable{"HOROVOD_ALLOW_MIXED_GPU_IMPL", Use::kBuildTime},
    HorovodVariable{"HOROVOD_CUDA_HOME", Use::kBuildTime},
    HorovodVariable{"HOROVOD_ROCM_HOME", Use::kBuildTime},
    HorovodVariable{"HOROVOD_NCCL_HOME", Use::kBuildTime},
    HorovodVariable{"HOROVOD_NCCL_INCLUDE", Use::kBuildTime},
    HorovodVariable{"HOROVOD_NCCL_LIB", Use::kBuildTime},
    HorovodVariable{"HOROVOD_NCCL_LINK", Use::kBuildTime},
    HorovodVariable{"HOROVOD_BUILD_ARCH_FLAGS", Use::kBuildTime},
    HorovodVariable{"HOROVOD_BUILD_CUDA_CC_LIST", Use::kBuildTime},
    HorovodVariable{"HOROVOD_CMAKE", Use::kBuildTime},
    HorovodVariable{"HOROVOD_DEBUG", Use::kBuildTime},
};

bool is_prefix_entry(std::string_view name) { return name.back() == '_'; }

// What a variable's integer means, for the message refusing a value that is none.
constexpr std::string_view kSwitch = "an integer (1 = on, 0 = off)";
constexpr std::string_view kByteCount = "an integer count of bytes (67108864 for 64 MiB)";

// Horovod reads these with strtol; hvrun takes the integer exactly as written, so that a word
// ("true") Horovod would silently read as 0 is an error rather than the opposite of its meaning.
Result<int64_t> horovod_integer(std::string_view name, std::string_view value,
                                std::string_view meaning) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size())
    return invalid_argument("invalid value '" + std::string(value) + "' for " +
                            std::string(name) + ": Horovod reads it as " + std::string(meaning));
  return v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status not_supported(const HorovodVariable& v, std::string_view value) {
  return invalid_argument(std::string(v.name) + "=" + std::string(value) +
                          ": not supported: " + std::string(v.note) + " (or unset " +
                          std::string(v.name) + ")");
}

}  // namespace

std::span<const HorovodVariable> horovod_variables() { return kVariables; }

const HorovodVariable* find_horovod_variable(std::string_view name) {
  for (const HorovodVariable& v : kVariables) {
    if (v.name == name) return &v;
    if (is_prefix_entry(v.name) && name.size() > v.name.size() && name.starts_with(v.name))
      return &v;
  }
  return nullptr;
}

Result<std::string> horovod_value_as_setting(const HorovodVariable& v, std::string_view value) {
  switch (v.reading) {
    case Reading::kSame: return std::string(value);
    case Reading::kBytesToMiB: {
      HVRUN_ASSIGN_OR_RETURN(int64_t bytes, horovod_integer(v.name, value, kByteCount));
      if (bytes < 0)
        return invalid_argument("invalid value '" + std::string(value) + "' for " +
                                std::string(v.name) + ": a byte count >= 0 is expected");
      return std::to_string(static_cast<double>(bytes) / (1024.0 * 1024.0));
    }
    case Reading::kFlagOnOff: {
      HVRUN_ASSIGN_OR_RETURN(int64_t n, horovod_integer(v.name, value, kSwitch));
      return std::string(n > 0 ? "on" : "off");
    }
    case Reading::kFlagTrue:
    case Reading::kFlagFalse: {
      HVRUN_ASSIGN_OR_RETURN(int64_t n, horovod_integer(v.name, value, kSwitch));
      return std::string((n > 0) == (v.reading == Reading::kFlagTrue) ? "true" : "false");
    }
    case Reading::kTimelinePath: return value == "DYNAMIC" ? std::string() : std::string(value);
    case Reading::kCpuOperations: {
      const std::string l = lower(value);
      if (l == "gloo") return std::string("gloo");
      return invalid_argument(std::string(v.name) + "=" + std::string(value) +
                              ": not supported: hvrun's CPU data planes are shared memory and "
                              "Gloo (no MPI or oneCCL); set it to GLOO, or unset it for "
                              "shared memory within a host");
    }
  }
  return internal_error("unknown Horovod reading");
}

Result<std::string> horovod_value_note(const HorovodVariable& v, std::string_view value) {
  const std::string shown = std::string(v.name) + "=" + std::string(value);
  switch (v.use) {
    case Use::kSetting:
    case Use::kSetByLauncher:
    case Use::kBuildTime: return std::string();
    case Use::kNoEffect: return shown + " has no effect: " + std::string(v.note);
    case Use::kUnsupported: return not_supported(v, value);
    case Use::kUnsupportedWhenOn: {
      HVRUN_ASSIGN_OR_RETURN(int64_t n, horovod_integer(v.name, value, kSwitch));
      if (n > 0) return not_supported(v, value);
      return shown + " has no effect: it asks for nothing hvrun does";
    }
    case Use::kUnsupportedUnlessOne: {
      HVRUN_ASSIGN_OR_RETURN(int64_t n, horovod_integer(v.name, value, kSwitch));
      if (n != 1) return not_supported(v, value);
      return shown + " has no effect: " + std::string(v.note);
    }
    case Use::kUnsupportedUnlessGloo:
      if (lower(value) != "gloo") return not_supported(v, value);
      return shown + " has no effect: hvrun's coordinator is the controller, working as "
                     "Horovod's Gloo controller does";
  }
  return std::string();
}

std::vector<std::string> unknown_horovod_variables(const std::vector<std::string>& names) {
  std::vector<std::string> unknown;
  for (const std::string& name : names)
    if (name.starts_with("HOROVOD_") && find_horovod_variable(name) == nullptr)
      unknown.push_back(name);
  return unknown;
}

std::string unknown_horovod_variables_warning() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    names.emplace_back(text.substr(0, text.find('=')));
  }
  const std::vector<std::string> unknown = unknown_horovod_variables(names);
  if (unknown.empty()) return std::string();
  std::string out = "ignoring ";
  for (size_t i = 0; i < unknown.size(); ++i) out += (i ? ", " : "") + unknown[i];
  return out + ": not variables of Horovod 0.28.1 that hvrun knows (see docs/horovod.md)";
}

}  // namespace hvrun
