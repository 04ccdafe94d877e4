#include "launcher/options/horovod_flags.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/settings.h"

namespace hvrun::launcher {
namespace {

using Effect = HorovodFlagEffect;

constexpr std::string_view kAutotuneOnly =
    "only --autotune reads it, and hvrun has no autotuner";

constexpr std::array kFlags = {
    HorovodFlag{"--network-interfaces", Effect::kSetting, 1, "network_interface"},
    HorovodFlag{"--no-hierarchical-allreduce", Effect::kSetting, 0, "hierarchical_allreduce",
                "off"},
    HorovodFlag{"--no-stall-check", Effect::kSetting, 0, "stall_check", "false"},
    HorovodFlag{"--gloo-timeout-seconds", Effect::kSetting, 1, "op_timeout_s", {}, {},
                HorovodValue::kNonNegativeInt},
    HorovodFlag{"--log-with-timestamp|--no-log-hide-timestamp", Effect::kSetting, 0,
                "log_timestamps", "true"},
    HorovodFlag{"--log-without-timestamp|--log-hide-timestamp", Effect::kSetting, 0,
                "log_timestamps", "false"},
    HorovodFlag{"--tcp", Effect::kSetting, 0, "network", "ethernet"},
    HorovodFlag{"-prefix-timestamp|--prefix-output-with-timestamp", Effect::kSetting, 0,
                "output_timestamps", "true"},

    HorovodFlag{"--gloo", Effect::kNoEffect, 0, {}, {},
                "hvrun's coordinator is the controller, working as Horovod's Gloo controller "
                "does; CPU tensors go over shared memory or Gloo (--cpu-backend)"},
    HorovodFlag{"--disable-cache", Effect::kNoEffect, 0, {}, {},
                "hvrun keeps no cache of its start-up checks: it runs them every time"},
    HorovodFlag{"--hierarchical-allgather|--no-hierarchical-allgather", Effect::kNoEffect, 0, {},
                {},
                "hvrun's allgather is not hierarchical (shared memory on one host, Gloo across "
                "hosts); results are the same"},
    HorovodFlag{"--torus-allreduce|--no-torus-allreduce", Effect::kNoEffect, 0, {}, {},
                "hvrun's NCCL allreduce runs on one communicator over all ranks and NCCL picks "
                "ring or tree itself; results are the same"},
    HorovodFlag{"--no-autotune", Effect::kNoEffect, 0, {}, {}, "hvrun never autotunes"},
    HorovodFlag{"--autotune-log-file", Effect::kNoEffect, 1, {}, {}, kAutotuneOnly},
    HorovodFlag{"--autotune-warmup-samples", Effect::kNoEffect, 1, {}, {}, kAutotuneOnly,
                HorovodValue::kNonNegativeInt},
    HorovodFlag{"--autotune-steps-per-sample", Effect::kNoEffect, 1, {}, {}, kAutotuneOnly,
                HorovodValue::kNonNegativeInt},
    HorovodFlag{"--autotune-bayes-opt-max-samples", Effect::kNoEffect, 1, {}, {}, kAutotuneOnly,
                HorovodValue::kNonNegativeInt},
    HorovodFlag{"--autotune-gaussian-process-noise", Effect::kNoEffect, 1, {}, {}, kAutotuneOnly,
                HorovodValue::kUnitInterval},
    HorovodFlag{"--timeline-mark-cycles|--no-timeline-mark-cycles", Effect::kNoEffect, 0, {}, {},
                "hvrun's timeline always marks every negotiation cycle that made a plan (the "
                "coordinator's 'plan' markers)"},
    HorovodFlag{"--mpi-threads-disable|--no-mpi-threads-disable", Effect::kNoEffect, 0, {}, {},
                "hvrun never initialises MPI"},
    HorovodFlag{"--num-nccl-streams", Effect::kNoEffectIfOne, 1, {}, {},
                "hvrun runs NCCL on one stream per rank (Horovod's default, 1); leave it out",
                HorovodValue::kNonNegativeInt},

    HorovodFlag{"--autotune", Effect::kUnsupported, 0, {}, {},
                "hvrun has no autotuner; set --fusion-threshold-mb and --cycle-time-ms instead"},
    HorovodFlag{"--min-num-proc", Effect::kSetting, 1, "min_np", {}, {},
                HorovodValue::kNonNegativeInt},
    HorovodFlag{"--max-num-proc", Effect::kSetting, 1, "max_np", {}, {},
                HorovodValue::kNonNegativeInt},
    HorovodFlag{"--thread-affinity", Effect::kUnsupported, 1, {}, {},
                "hvrun does not pin its background thread on its own; use --bind-to block, which "
                "binds each rank's whole process (every thread) to cores of its own"},
    HorovodFlag{"--jsrun", Effect::kUnsupported, 0, {}, {},
                "hvrun starts its workers itself (ssh to each host) and has no jsrun launch; "
                "drop --jsrun and give the hosts with -H or --hostfile"},
    HorovodFlag{"--binding-args", Effect::kUnsupported, 1, {}, {},
                "hvrun hands mpirun binding arguments on with --mpi --mpi-args '...'; without "
                "--mpi use --bind-to block"},
};

Status check_value(const HorovodFlag& entry, std::string_view flag, const std::string& value) {
  const auto refuse = [&](std::string_view expected) {
    return invalid_argument("invalid value '" + value + "' for " + std::string(flag) +
                            ": expected " + std::string(expected));
  };
  switch (entry.value_kind) {
    case HorovodValue::kText: return Status::ok();
    case HorovodValue::kNonNegativeInt: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < 0)
        return refuse("an integer >= 0");
      return Status::ok();
    }
    case HorovodValue::kUnitInterval: {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 1)
        return refuse("a number from 0 to 1");
      return Status::ok();
    }
  }
  return Status::ok();
}

}  // namespace

const HorovodFlag* find_horovod_flag(std::string_view flag) {
  for (const HorovodFlag& f : kFlags)
    if (is_one_of(f.spellings, flag)) return &f;
  return nullptr;
}

Result<HorovodFlagOutcome> interpret_horovod_flag(const HorovodFlag& entry, std::string_view flag,
                                                  const std::vector<std::string>& values) {
  if (static_cast<int>(values.size()) != entry.values)
    return invalid_argument(std::string(flag) + " takes " + std::to_string(entry.values) +
                            " value(s), got " + std::to_string(values.size()));
  for (const std::string& v : values) HVRUN_RETURN_IF_ERROR(check_value(entry, flag, v));
  HorovodFlagOutcome out;
  switch (entry.effect) {
    case Effect::kSetting:
      out.setting_text = entry.values == 0 ? std::string(entry.fixed) : values[0];
      return out;
    case Effect::kNoEffect:
      out.note = std::string(flag) + " has no effect: " + std::string(entry.note);
      return out;
    case Effect::kNoEffectIfOne:
      if (values[0] == "1") {
        out.note = std::string(flag) + " 1 has no effect: " + std::string(entry.note);
        return out;
      }
      [[fallthrough]];
    case Effect::kUnsupported: {
      std::string shown(flag);
      for (const std::string& v : values) shown += " " + v;
      return invalid_argument(shown + ": not supported: " + std::string(entry.note));
    }
  }
  return internal_error("unknown horovodrun flag effect");
}

}  // namespace hvrun::launcher
