// Every HOROVOD_* variable of Horovod 0.28.1, read by the settings registry: a setting in
// Horovod's units, a note when it changes nothing, an error when hvrun cannot do what it asks.
#include "common/horovod_variables.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/setting_keys.h"
#include "tests/support/environment_map.h"
#include "common/settings.h"

namespace hvrun {
namespace {


// Horovod 0.28.1's variables, written out from horovod/common/common.h, logging.cc,
// gloo/gloo_context.cc, runner/common/util/config_parser.py, runner/launch.py and setup.py.
const std::vector<std::string> kHorovodVariables = {
    "HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME", "HOROVOD_CACHE_CAPACITY",
    "HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLGATHER", "HOROVOD_TORUS_ALLREDUCE",
    "HOROVOD_AUTOTUNE", "HOROVOD_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES",
    "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
    "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "HOROVOD_TIMELINE", "HOROVOD_TIMELINE_MARK_CYCLES",
    "HOROVOD_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_TIME_SECONDS",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_MPI_THREADS_DISABLE",
    "HOROVOD_NUM_NCCL_STREAMS", "HOROVOD_THREAD_AFFINITY", "HOROVOD_GLOO_TIMEOUT_SECONDS",
    "HOROVOD_LOG_LEVEL", "HOROVOD_LOG_HIDE_TIME", "HOROVOD_START_TIMEOUT", "HOROVOD_ELASTIC",
    "HOROVOD_ELASTIC_TIMEOUT", "HOROVOD_BATCH_D2D_MEMCOPIES", "HOROVOD_CPU_OPERATIONS",
    "HOROVOD_CONTROLLER", "HOROVOD_CCL_CACHE", "HOROVOD_GLOO_IFACE",
    "HOROVOD_ADASUM_MPI_CHUNK_SIZE", "HOROVOD_DISABLE_GROUP_FUSION",
    "HOROVOD_DISABLE_NVTX_RANGES", "HOROVOD_ENABLE_ASYNC_COMPLETION",
    "HOROVOD_DYNAMIC_PROCESS_SETS", "HOROVOD_ENABLE_XLA_OPS", "HOROVOD_SPARK_START_TIMEOUT",
    "HOROVOD_SPARK_USE_LOCAL_RANK_GPU_INDEX", "HOROVOD_RANK", "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE",
    "HOROVOD_HOSTNAME", "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT",
    "HOROVOD_SECRET_KEY", "HOROVOD_WITH_PYTORCH", "HOROVOD_WITHOUT_MPI", "HOROVOD_GPU",
    "HOROVOD_GPU_OPERATIONS", "HOROVOD_GPU_ALLREDUCE", "HOROVOD_GPU_ALLGATHER",
    "HOROVOD_GPU_BROADCAST", "HOROVOD_GPU_ALLTOALL", "HOROVOD_GPU_REDUCESCATTER",
    "HOROVOD_ALLOW_MIXED_GPU_IMPL", "HOROVOD_CUDA_HOME", "HOROVOD_ROCM_HOME",
    "HOROVOD_NCCL_HOME", "HOROVOD_NCCL_INCLUDE", "HOROVOD_NCCL_LIB", "HOROVOD_NCCL_LINK",
    "HOROVOD_BUILD_ARCH_FLAGS", "HOROVOD_BUILD_CUDA_CC_LIST", "HOROVOD_CMAKE", "HOROVOD_DEBUG",
};

TEST(HorovodVariablesTest, EveryHorovodVariableIsKnown) {
  for (const std::string& name : kHorovodVariables)
    EXPECT_NE(find_horovod_variable(name), nullptr) << name;
  EXPECT_TRUE(unknown_horovod_variables(kHorovodVariables).empty());
}

TEST(HorovodVariablesTest, EverySettingVariableNamesARegisteredSetting) {
  for (const HorovodVariable& v : horovod_variables()) {
    if (v.use == HorovodVariableUse::kSetting) {
      EXPECT_NE(find_setting(v.setting), nullptr) << v.name << " -> " << v.setting;
    }
  }
}

// "FUSION_THRESHOLD_33554432": gtest's name of one case.
template <typename Case>
std::string case_name(const ::testing::TestParamInfo<Case>& param_info) {
  std::string n = param_info.param.variable.substr(8) + "_" + param_info.param.value;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// One variable set in Horovod's form, and the setting's text it must give.
struct SettingCase {
  std::string variable, value, setting, expected;
};

class HorovodSettingTest : public ::testing::TestWithParam<SettingCase> {};

TEST_P(HorovodSettingTest, SetsTheSettingInHorovodsUnits) {
  const SettingCase& c = GetParam();
  std::map<std::string, std::string> env{{c.variable, c.value}};
  Settings s;
  ASSERT_TRUE(s.apply_environment(test::environment_of(env)).is_ok());
  EXPECT_EQ(s.text(c.setting), c.expected);
  EXPECT_EQ(s.source(c.setting), SettingSource::kEnvironment);
  EXPECT_EQ(s.origin(c.setting), c.variable);
}

INSTANTIATE_TEST_SUITE_P(
    EachVariable, HorovodSettingTest,
    ::testing::Values(
        SettingCase{"HOROVOD_FUSION_THRESHOLD", "33554432", "fusion_threshold_mb", "32"},
        SettingCase{"HOROVOD_FUSION_THRESHOLD", "0", "fusion_threshold_mb", "0"},
        SettingCase{"HOROVOD_CYCLE_TIME", "3.5", "cycle_time_ms", "3.5"},
        SettingCase{"HOROVOD_CACHE_CAPACITY", "2048", "cache_capacity", "2048"},
        SettingCase{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1", "hierarchical_allreduce", "on"},
        SettingCase{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0", "hierarchical_allreduce", "off"},
        SettingCase{"HOROVOD_TIMELINE", "/tmp/t.json", "timeline_filename", "/tmp/t.json"},
        SettingCase{"HOROVOD_TIMELINE", "DYNAMIC", "timeline_filename", ""},
        SettingCase{"HOROVOD_STALL_CHECK_DISABLE", "1", "stall_check", "false"},
        SettingCase{"HOROVOD_STALL_CHECK_DISABLE", "0", "stall_check", "true"},
        SettingCase{"HOROVOD_STALL_CHECK_TIME_SECONDS", "120", "stall_warning_s", "120"},
        SettingCase{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "240", "stall_shutdown_s", "240"},
        SettingCase{"HOROVOD_GLOO_TIMEOUT_SECONDS", "60", "op_timeout_s", "60"},
        SettingCase{"HOROVOD_START_TIMEOUT", "45", "start_timeout_s", "45"},
        SettingCase{"HOROVOD_ELASTIC_TIMEOUT", "120", "elastic_timeout_s", "120"},
        SettingCase{"HOROVOD_LOG_LEVEL", "WARNING", "log_level", "warn"},
        SettingCase{"HOROVOD_LOG_LEVEL", "FATAL", "log_level", "error"},
        SettingCase{"HOROVOD_LOG_LEVEL", "TRACE", "log_level", "trace"},
        SettingCase{"HOROVOD_LOG_HIDE_TIME", "1", "log_timestamps", "false"},
        SettingCase{"HOROVOD_GLOO_IFACE", "eth1", "network_interface", "eth1"},
        SettingCase{"HOROVOD_CPU_OPERATIONS", "GLOO", "cpu_backend", "gloo"}),
    case_name<SettingCase>);

struct NoteCase {
  std::string variable, value;
  bool refused;  // an error (not supported) rather than a note
};

class HorovodNoteTest : public ::testing::TestWithParam<NoteCase> {};

TEST_P(HorovodNoteTest, NotesOrRefuses) {
  const NoteCase& c = GetParam();
  std::map<std::string, std::string> env{{c.variable, c.value}};
  Settings s;
  Status st = s.apply_environment(test::environment_of(env));
  if (c.refused) {
    ASSERT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find(c.variable + "=" + c.value + ": not supported: "),
              std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("unset " + c.variable), std::string::npos) << st.message();
  } else {
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_EQ(s.notes().size(), 1u);
    EXPECT_EQ(s.notes()[0].rfind(c.variable + "=" + c.value + " has no effect: ", 0), 0u)
        << s.notes()[0];
  }
}

INSTANTIATE_TEST_SUITE_P(
    EachVariable, HorovodNoteTest,
    ::testing::Values(NoteCase{"HOROVOD_AUTOTUNE", "1", true},
                      NoteCase{"HOROVOD_AUTOTUNE", "0", false},
                      NoteCase{"HOROVOD_AUTOTUNE_LOG", "/tmp/a.csv", false},
                      NoteCase{"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "5", false},
                      NoteCase{"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "20", false},
                      NoteCase{"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "50", false},
                      NoteCase{"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.9", false},
                      NoteCase{"HOROVOD_ELASTIC", "1", false},
                      NoteCase{"HOROVOD_NUM_NCCL_STREAMS", "1", false},
                      NoteCase{"HOROVOD_NUM_NCCL_STREAMS", "2", true},
                      NoteCase{"HOROVOD_THREAD_AFFINITY", "0,1", true},
                      NoteCase{"HOROVOD_CONTROLLER", "gloo", false},
                      NoteCase{"HOROVOD_CONTROLLER", "MPI", true},
                      NoteCase{"HOROVOD_HIERARCHICAL_ALLGATHER", "1", false},
                      NoteCase{"HOROVOD_TORUS_ALLREDUCE", "1", false},
                      NoteCase{"HOROVOD_TIMELINE_MARK_CYCLES", "1", false},
                      NoteCase{"HOROVOD_MPI_THREADS_DISABLE", "1", false},
                      NoteCase{"HOROVOD_BATCH_D2D_MEMCOPIES", "0", false},
                      NoteCase{"HOROVOD_DISABLE_GROUP_FUSION", "1", false},
                      NoteCase{"HOROVOD_ENABLE_ASYNC_COMPLETION", "1", false},
                      NoteCase{"HOROVOD_ENABLE_XLA_OPS", "1", false},
                      NoteCase{"HOROVOD_DISABLE_NVTX_RANGES", "1", false},
                      NoteCase{"HOROVOD_ADASUM_MPI_CHUNK_SIZE", "1048576", false},
                      NoteCase{"HOROVOD_CCL_CACHE", "1", false},
                      NoteCase{"HOROVOD_DYNAMIC_PROCESS_SETS", "1", false},
                      NoteCase{"HOROVOD_SPARK_START_TIMEOUT", "600", false},
                      NoteCase{"HOROVOD_SPARK_USE_LOCAL_RANK_GPU_INDEX", "1", false}),
    case_name<NoteCase>);

TEST(HorovodVariablesTest, CpuOperationsOtherThanGlooAreRefused) {
  for (std::string value : {"MPI", "CCL"}) {
    std::map<std::string, std::string> env{{"HOROVOD_CPU_OPERATIONS", value}};
    Settings s;
    Status st = s.apply_environment(test::environment_of(env));
    ASSERT_FALSE(st.is_ok()) << value;
    EXPECT_NE(st.message().find("not supported"), std::string::npos) << st.message();
  }
}

TEST(HorovodVariablesTest, LauncherAndBuildVariablesAreSilent) {
  std::map<std::string, std::string> env{{"HOROVOD_RANK", "3"},
                                         {"HOROVOD_GPU_OPERATIONS", "NCCL"},
                                         {"HOROVOD_WITH_PYTORCH", "1"}};
  Settings s;
  ASSERT_TRUE(s.apply_environment(test::environment_of(env)).is_ok());
  EXPECT_TRUE(s.notes().empty());
}

TEST(HorovodVariablesTest, HvrunVariableWinsOverHorovods) {
  std::map<std::string, std::string> env{{"HOROVOD_CYCLE_TIME", "7"}, {"HVRUN_CYCLE_TIME", "2"},
                                         {"HOROVOD_FUSION_THRESHOLD", "1048576"}};
  Settings s;
  ASSERT_TRUE(s.apply_environment(test::environment_of(env)).is_ok());
  EXPECT_DOUBLE_EQ(s.get(setting::kCycleTimeMs), 2.0);
  EXPECT_EQ(s.origin("cycle_time_ms"), "HVRUN_CYCLE_TIME");
  EXPECT_DOUBLE_EQ(s.get(setting::kFusionThresholdMb), 1.0);
  EXPECT_EQ(s.origin("fusion_threshold_mb"), "HOROVOD_FUSION_THRESHOLD");
  // A flag still beats both.
  ASSERT_TRUE(s.apply_flag("--cycle-time-ms", "9", true).is_ok());
  EXPECT_DOUBLE_EQ(s.get(setting::kCycleTimeMs), 9.0);
}

TEST(HorovodVariablesTest, PrintConfigNamesTheVariableThatSetEachValue) {
  std::map<std::string, std::string> env{{"HOROVOD_CYCLE_TIME", "7"},
                                         {"HVRUN_CACHE_CAPACITY", "5"}};
  Settings s;
  ASSERT_TRUE(s.apply_environment(test::environment_of(env)).is_ok());
  std::ostringstream out;
  s.print(out);
  bool saw_cycle = false, saw_cache = false;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("cycle_time_ms ", 0) == 0) {
      saw_cycle = true;
      EXPECT_NE(line.find("environment HOROVOD_CYCLE_TIME"), std::string::npos) << line;
    }
    if (line.rfind("cache_capacity ", 0) == 0) {
      saw_cache = true;
      EXPECT_NE(line.find("environment HVRUN_CACHE_CAPACITY"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(saw_cycle && saw_cache) << out.str();
}

TEST(HorovodVariablesTest, BadHorovodValueNamesTheVariable) {
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"HOROVOD_FUSION_THRESHOLD", "64MB"},
           {"HOROVOD_HIERARCHICAL_ALLREDUCE", "true"},
           {"HOROVOD_CYCLE_TIME", "fast"}}) {
    std::map<std::string, std::string> env{{name, value}};
    Settings s;
    Status st = s.apply_environment(test::environment_of(env));
    ASSERT_FALSE(st.is_ok()) << name;
    EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
  }
}

// A byte count is refused as a byte count, a switch as a switch.
TEST(HorovodVariablesTest, ARefusedIntegerIsDescribedAsWhatTheVariableCounts) {
  const HorovodVariable* threshold = find_horovod_variable("HOROVOD_FUSION_THRESHOLD");
  ASSERT_NE(threshold, nullptr);
  Result<std::string> bytes = horovod_value_as_setting(*threshold, "abc");
  ASSERT_FALSE(bytes.is_ok());
  EXPECT_NE(bytes.status().message().find("an integer count of bytes"), std::string::npos)
      << bytes.status().message();
  EXPECT_EQ(bytes.status().message().find("1 = on"), std::string::npos) << bytes.status().message();
  const HorovodVariable* timeline_marks = find_horovod_variable("HOROVOD_LOG_HIDE_TIME");
  ASSERT_NE(timeline_marks, nullptr);
  Result<std::string> flag = horovod_value_as_setting(*timeline_marks, "abc");
  ASSERT_FALSE(flag.is_ok());
  EXPECT_NE(flag.status().message().find("1 = on, 0 = off"), std::string::npos)
      << flag.status().message();
}

TEST(HorovodVariablesTest, UnknownNamesAreListed) {
  auto unknown = unknown_horovod_variables(
      {"HOROVOD_FUSION_THRESHOLD", "HOROVOD_FUSION_TRESHOLD", "PATH", "HOROVOD_WITH_MXNET"});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0], "HOROVOD_FUSION_TRESHOLD");
}

}  // namespace
}  // namespace hvrun
