// CoordinatorOptions from the settings registry.
#include <cmath>
#include <cstdlib>

#include "common/setting_keys.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/telemetry/timeline_writer.h"

namespace hvrun::coordinator {

CoordinatorOptions CoordinatorOptions::from_settings(const Settings& settings) {
  CoordinatorOptions options;
  options.listen_address =
      "127.0.0.1:" + std::to_string(settings.get(setting::kCoordinatorPort));
  options.start_timeout = std::chrono::milliseconds(
      std::llround(settings.get(setting::kStartTimeoutSeconds) * 1000.0));
  options.fusion_threshold_bytes =
      std::llround(settings.get(setting::kFusionThresholdMb) * 1024.0 * 1024.0);
  options.cycle_time =
      std::chrono::microseconds(std::llround(settings.get(setting::kCycleTimeMs) * 1000.0));
  options.cache_capacity = static_cast<int>(settings.get(setting::kCacheCapacity));
  options.stall_warning = std::chrono::milliseconds(
      std::llround(settings.get(setting::kStallWarningSeconds) * 1000.0));
  options.stall_shutdown = std::chrono::milliseconds(
      std::llround(settings.get(setting::kStallShutdownSeconds) * 1000.0));
  options.op_mismatch_grace = std::chrono::milliseconds(
      std::llround(settings.get(setting::kOpMismatchGraceSeconds) * 1000.0));
  if (!settings.get(setting::kStallCheck)) {  // the inspector off: neither warns nor shuts down
    options.stall_warning = std::chrono::milliseconds(0);
    options.stall_shutdown = std::chrono::milliseconds(0);
  }
  options.heartbeat_timeout = std::chrono::milliseconds(
      std::llround(settings.get(setting::kHeartbeatTimeoutSeconds) * 1000.0));
  options.join_average_all = settings.get(setting::kJoinAverage) == "all";
  options.autopsy_on_stall = settings.get(setting::kAutopsy);
  options.autopsy_deadline = std::chrono::milliseconds(
      std::llround(settings.get(setting::kAutopsyDeadlineSeconds) * 1000.0));
  // hvrun --max-restarts starts a fresh coordinator per attempt (HVRUN_RESTART_COUNT in
  // hvrun's environment): each attempt writes its own timeline, FILE, FILE.restart1, ...
  {
    const char* attempt = std::getenv("HVRUN_RESTART_COUNT");
    options.timeline_filename = telemetry::timeline_path_for_attempt(
        settings.get(setting::kTimelineFilename), attempt ? std::atoi(attempt) : 0);
  }
  options.timeline_horovod_names = settings.get(setting::kTimelineNames) == "horovod";
  options.straggler_warning = std::chrono::microseconds(
      std::llround(settings.get(setting::kStragglerWarningMs) * 1000.0));
  if (settings.get(setting::kReplaceStragglers)) {
    options.straggler_replace_threshold = std::chrono::microseconds(
        std::llround(settings.get(setting::kStragglerReplaceMs) * 1000.0));
    options.straggler_replace_window =
        static_cast<size_t>(settings.get(setting::kStragglerReplaceWindow));
  }
  for (const SettingSpec& spec : all_settings()) {
    options.job_settings[std::string(spec.name)] = settings.text(spec.name);
  }
  return options;
}

}  // namespace hvrun::coordinator
