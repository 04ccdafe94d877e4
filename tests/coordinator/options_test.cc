// CoordinatorOptions from the settings registry, and the Status <-> gRPC mapping at the edge.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/settings.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/service/grpc_status.h"
#include "tests/support/environment_map.h"

namespace hvrun::coordinator {
namespace {

TEST(CoordinatorOptions, FromSettingsReadsEveryCoordinatorTunable) {
  Settings settings;
  ASSERT_TRUE(settings.set("fusion_threshold_mb", "2.5", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("cycle_time_ms", "0.25", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("cache_capacity", "7", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("start_timeout_s", "1.5", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("coordinator_port", "29500", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("stall_warning_s", "2", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("stall_shutdown_s", "9", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("heartbeat_timeout_s", "4.5", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("join_average", "all", SettingSource::kOverride).is_ok());
  ASSERT_TRUE(settings.set("straggler_warning_ms", "12.5", SettingSource::kOverride).is_ok());
  const auto options = CoordinatorOptions::from_settings(settings);
  EXPECT_EQ(options.fusion_threshold_bytes, 2621440);
  EXPECT_EQ(options.cycle_time, std::chrono::microseconds(250));
  EXPECT_EQ(options.cache_capacity, 7);
  EXPECT_EQ(options.start_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(options.listen_address, "127.0.0.1:29500");
  EXPECT_EQ(options.stall_warning, std::chrono::seconds(2));
  EXPECT_EQ(options.stall_shutdown, std::chrono::seconds(9));
  EXPECT_EQ(options.heartbeat_timeout, std::chrono::milliseconds(4500));
  EXPECT_TRUE(options.join_average_all);
  EXPECT_EQ(options.straggler_warning, std::chrono::microseconds(12500));
  EXPECT_EQ(CoordinatorOptions::from_settings(Settings()).straggler_warning,
            std::chrono::microseconds(0));  // off by default
  EXPECT_FALSE(CoordinatorOptions::from_settings(Settings()).join_average_all);
  EXPECT_EQ(options.job_settings.at("cycle_time_ms"), "0.25");
  EXPECT_EQ(options.job_settings.size(), all_settings().size());
}

// Horovod's variables reach the coordinator in Horovod's units; the stall check off turns off
// both the warning and the shutdown, as Horovod's HOROVOD_STALL_CHECK_DISABLE does.
TEST(CoordinatorOptions, HorovodVariablesInHorovodsUnits) {
  const std::map<std::string, std::string> env{{"HOROVOD_FUSION_THRESHOLD", "67108864"},
                                               {"HOROVOD_CYCLE_TIME", "5"},
                                               {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "30"},
                                               {"HOROVOD_STALL_CHECK_DISABLE", "1"}};
  Settings settings;
  ASSERT_TRUE(settings.apply_environment(test::environment_of(env)).is_ok());
  const auto options = CoordinatorOptions::from_settings(settings);
  EXPECT_EQ(options.fusion_threshold_bytes, 64 << 20);
  EXPECT_EQ(options.cycle_time, std::chrono::milliseconds(5));
  EXPECT_EQ(options.stall_warning, std::chrono::milliseconds(0));
  EXPECT_EQ(options.stall_shutdown, std::chrono::milliseconds(0));
  Settings checked;
  ASSERT_TRUE(checked.set("stall_shutdown_s", "30", SettingSource::kOverride).is_ok());
  EXPECT_EQ(CoordinatorOptions::from_settings(checked).stall_shutdown, std::chrono::seconds(30));
  EXPECT_FALSE(CoordinatorOptions::from_settings(checked).timeline_horovod_names);
  ASSERT_TRUE(checked.set("timeline_names", "horovod", SettingSource::kOverride).is_ok());
  EXPECT_TRUE(CoordinatorOptions::from_settings(checked).timeline_horovod_names);
}

// A stalled job ends by default (with its autopsy); 0 still means never, under either name.
TEST(CoordinatorOptions, AStalledJobIsShutDownByDefault) {
  EXPECT_EQ(CoordinatorOptions::from_settings(Settings()).stall_shutdown, std::chrono::minutes(10));
  EXPECT_EQ(CoordinatorOptions{}.stall_shutdown, std::chrono::minutes(10));
  EXPECT_EQ(CoordinatorOptions::from_settings(Settings()).op_mismatch_grace,
            std::chrono::seconds(2));
  for (const char* variable :
       {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "HVRUN_STALL_SHUTDOWN_TIME_SECONDS"}) {
    Settings settings;
    ASSERT_TRUE(
        settings.apply_environment(test::environment_of({{variable, "0"}})).is_ok());
    EXPECT_EQ(CoordinatorOptions::from_settings(settings).stall_shutdown,
              std::chrono::milliseconds(0))
        << variable;
  }
}

TEST(GrpcStatus, EveryHvrunCodeMapsToTheSameGrpcCodeAndBack) {
  for (StatusCode code :
       {StatusCode::kCancelled, StatusCode::kInvalidArgument, StatusCode::kDeadlineExceeded,
        StatusCode::kNotFound, StatusCode::kAlreadyExists, StatusCode::kResourceExhausted,
        StatusCode::kFailedPrecondition, StatusCode::kAborted, StatusCode::kUnimplemented,
        StatusCode::kInternal, StatusCode::kUnavailable, StatusCode::kUnauthenticated}) {
    const Status status(code, "what happened");
    const grpc::Status wire = to_grpc(status);
    EXPECT_EQ(static_cast<int>(wire.error_code()), static_cast<int>(code));
    EXPECT_EQ(wire.error_message(), "what happened");
    EXPECT_EQ(from_grpc(wire), status);
  }
  EXPECT_TRUE(to_grpc(Status::ok()).ok());
  EXPECT_TRUE(from_grpc(grpc::Status::OK).is_ok());
  const Status unknown = from_grpc(grpc::Status(grpc::StatusCode::UNKNOWN, "boom"));
  EXPECT_EQ(unknown.code(), StatusCode::kInternal);
  EXPECT_EQ(unknown.message(), "UNKNOWN: boom");
}

}  // namespace
}  // namespace hvrun::coordinator
