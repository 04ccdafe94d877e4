// Typed keys for the settings declared in settings_catalog.cc. Add a key here and its spec there.
#pragma once

#include <cstdint>
#include <string>

#include "common/settings.h"

namespace hvrun::setting {

// Everywhere.
inline constexpr SettingKey<std::string> kLogLevel{"log_level"};
inline constexpr SettingKey<bool> kLogTimestamps{"log_timestamps"};

// Launcher.
inline constexpr SettingKey<bool> kVerbose{"verbose"};
inline constexpr SettingKey<std::string> kOutputFilename{"output_filename"};
inline constexpr SettingKey<double> kGracePeriodSeconds{"grace_period_s"};
inline constexpr SettingKey<std::string> kGpuPinning{"gpu_pinning"};
inline constexpr SettingKey<std::string> kNcclP2p{"nccl_p2p"};
inline constexpr SettingKey<std::string> kDevice{"device"};
inline constexpr SettingKey<bool> kTagOutput{"tag_output"};
inline constexpr SettingKey<bool> kOutputTimestamps{"output_timestamps"};
inline constexpr SettingKey<std::string> kBindTo{"bind_to"};
inline constexpr SettingKey<int64_t> kSshPort{"ssh_port"};
inline constexpr SettingKey<std::string> kSshIdentityFile{"ssh_identity_file"};
inline constexpr SettingKey<std::string> kRsh{"rsh"};
inline constexpr SettingKey<std::string> kRemoteLauncher{"remote_launcher"};
inline constexpr SettingKey<std::string> kSrunArgs{"srun_args"};
inline constexpr SettingKey<bool> kMpi{"mpi"};
inline constexpr SettingKey<std::string> kMpiArgs{"mpi_args"};
inline constexpr SettingKey<std::string> kNetworkInterface{"network_interface"};
inline constexpr SettingKey<std::string> kNetwork{"network"};
inline constexpr SettingKey<int64_t> kMaxRestarts{"max_restarts"};
inline constexpr SettingKey<int64_t> kMinNp{"min_np"};
inline constexpr SettingKey<int64_t> kMaxNp{"max_np"};
inline constexpr SettingKey<std::string> kHostDiscoveryScript{"host_discovery_script"};
inline constexpr SettingKey<int64_t> kSlotsPerHost{"slots_per_host"};
inline constexpr SettingKey<double> kElasticTimeoutSeconds{"elastic_timeout_s"};
inline constexpr SettingKey<int64_t> kResetLimit{"reset_limit"};
inline constexpr SettingKey<std::string> kBlacklistCooldownRange{"blacklist_cooldown_range"};
inline constexpr SettingKey<bool> kHealthCheck{"health_check"};
inline constexpr SettingKey<std::string> kHealthCheckScript{"health_check_script"};
inline constexpr SettingKey<double> kHealthCheckTimeoutSeconds{"health_check_timeout_s"};
inline constexpr SettingKey<int64_t> kHealthMinFreeDiskMb{"health_min_free_disk_mb"};
inline constexpr SettingKey<std::string> kHealthDiskPath{"health_disk_path"};
inline constexpr SettingKey<int64_t> kSpares{"spares"};
inline constexpr SettingKey<bool> kSummary{"summary"};
inline constexpr SettingKey<std::string> kAutopsyDir{"autopsy_dir"};

// Coordinator.
inline constexpr SettingKey<double> kStartTimeoutSeconds{"start_timeout_s"};
inline constexpr SettingKey<int64_t> kCoordinatorPort{"coordinator_port"};
inline constexpr SettingKey<double> kFusionThresholdMb{"fusion_threshold_mb"};
inline constexpr SettingKey<double> kCycleTimeMs{"cycle_time_ms"};
inline constexpr SettingKey<int64_t> kCacheCapacity{"cache_capacity"};
inline constexpr SettingKey<bool> kStallCheck{"stall_check"};
inline constexpr SettingKey<double> kStallWarningSeconds{"stall_warning_s"};
inline constexpr SettingKey<double> kStallShutdownSeconds{"stall_shutdown_s"};
inline constexpr SettingKey<double> kOpMismatchGraceSeconds{"op_mismatch_grace_s"};
inline constexpr SettingKey<double> kHeartbeatTimeoutSeconds{"heartbeat_timeout_s"};
inline constexpr SettingKey<std::string> kJoinAverage{"join_average"};
inline constexpr SettingKey<int64_t> kMetricsPort{"metrics_port"};
inline constexpr SettingKey<std::string> kMetricsAddress{"metrics_address"};
inline constexpr SettingKey<std::string> kTimelineFilename{"timeline_filename"};
inline constexpr SettingKey<std::string> kTimelineNames{"timeline_names"};
inline constexpr SettingKey<double> kStragglerWarningMs{"straggler_warning_ms"};
inline constexpr SettingKey<bool> kReplaceStragglers{"replace_stragglers"};
inline constexpr SettingKey<double> kStragglerReplaceMs{"straggler_replace_ms"};
inline constexpr SettingKey<int64_t> kStragglerReplaceWindow{"straggler_replace_window"};
inline constexpr SettingKey<bool> kAutopsy{"autopsy"};
inline constexpr SettingKey<double> kAutopsyDeadlineSeconds{"autopsy_deadline_s"};

// Worker library.
inline constexpr SettingKey<double> kOpTimeoutSeconds{"op_timeout_s"};
inline constexpr SettingKey<std::string> kCheckpointDir{"checkpoint_dir"};
inline constexpr SettingKey<int64_t> kCheckpointEvery{"checkpoint_every"};
inline constexpr SettingKey<int64_t> kCheckpointKeep{"checkpoint_keep"};
inline constexpr SettingKey<std::string> kCheckpointName{"checkpoint_name"};
inline constexpr SettingKey<std::string> kCpuBackend{"cpu_backend"};
inline constexpr SettingKey<std::string> kDevicePlane{"device_plane"};
inline constexpr SettingKey<std::string> kHierarchicalAllreduce{"hierarchical_allreduce"};
inline constexpr SettingKey<int64_t> kShmChunkKb{"shm_chunk_kb"};
inline constexpr SettingKey<bool> kFastPath{"fast_path"};
inline constexpr SettingKey<double> kFastPathWaitMs{"fast_path_wait_ms"};
inline constexpr SettingKey<int64_t> kFlightRecorderSize{"flight_recorder_size"};

}  // namespace hvrun::setting
