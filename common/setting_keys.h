// Typed keys for the settings declared in settings_catalog.cc. Add a key here and its spec there.
#pragma once

#include <cstdint>
#include <string>

#include "common/settings.h"

namespace hvrun::setting {

// Everywhere.
inline constexpr SettingKey<std::string> kLogLevel{"log_level"};

// Launcher.
inline constexpr SettingKey<bool> kVerbose{"verbose"};
inline constexpr SettingKey<std::string> kOutputFilename{"output_filename"};
inline constexpr SettingKey<double> kGracePeriodSeconds{"grace_period_s"};
inline constexpr SettingKey<std::string> kGpuPinning{"gpu_pinning"};
inline constexpr SettingKey<std::string> kNcclP2p{"nccl_p2p"};
inline constexpr SettingKey<std::string> kDevice{"device"};
inline constexpr SettingKey<bool> kTagOutput{"tag_output"};

// Coordinator.
inline constexpr SettingKey<double> kStartTimeoutSeconds{"start_timeout_s"};
inline constexpr SettingKey<int64_t> kCoordinatorPort{"coordinator_port"};
inline constexpr SettingKey<double> kFusionThresholdMb{"fusion_threshold_mb"};
inline constexpr SettingKey<double> kCycleTimeMs{"cycle_time_ms"};
inline constexpr SettingKey<int64_t> kCacheCapacity{"cache_capacity"};
inline constexpr SettingKey<double> kStallWarningSeconds{"stall_warning_s"};
inline constexpr SettingKey<double> kStallShutdownSeconds{"stall_shutdown_s"};
inline constexpr SettingKey<double> kHeartbeatTimeoutSeconds{"heartbeat_timeout_s"};
inline constexpr SettingKey<std::string> kJoinAverage{"join_average"};

// Worker library.
inline constexpr SettingKey<double> kOpTimeoutSeconds{"op_timeout_s"};

}  // namespace hvrun::setting
