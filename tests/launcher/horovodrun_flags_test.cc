// Every flag of horovodrun 0.28.1 (horovod/runner/launch.py, written out here, not read at run
// time), given to hvrun's parser as a Horovod job script gives it, followed by the command:
// each is accepted with its documented effect (a setting, a note that it changes nothing), or
// refused with "not supported: <why>, <what to use>"; and none swallows the command.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/setting_keys.h"
#include "launcher/options/horovod_config_file.h"
#include "launcher/options/options.h"

namespace hvrun::launcher {
namespace {

const char* no_env(const char*) { return nullptr; }

enum class Expect { kSetting, kNote, kRefused, kLauncher };

struct FlagCase {
  std::vector<std::string> words;  // the flag and the values horovodrun takes after it
  Expect expect;
  std::string setting = {};        // kSetting: the registry setting and its text afterwards
  std::string text = {};
};

const std::vector<FlagCase> kHorovodrunFlags = {
    {{"-v"}, Expect::kLauncher},
    {{"--version"}, Expect::kLauncher},
    {{"-np", "4"}, Expect::kLauncher},
    {{"--num-proc", "4"}, Expect::kLauncher},
    {{"-cb"}, Expect::kLauncher},
    {{"--check-build"}, Expect::kLauncher},
    {{"--disable-cache"}, Expect::kNote},
    {{"--start-timeout", "45"}, Expect::kSetting, "start_timeout_s", "45"},
    {{"--network-interfaces", "eth0,eth1"}, Expect::kSetting, "network_interface", "eth0,eth1"},
    {{"--network-interface", "eth0"}, Expect::kSetting, "network_interface", "eth0"},
    {{"--output-filename", "/tmp/out"}, Expect::kSetting, "output_filename", "/tmp/out"},
    {{"--verbose"}, Expect::kSetting, "verbose", "true"},
    {{"-p", "2222"}, Expect::kSetting, "ssh_port", "2222"},
    {{"--ssh-port", "2222"}, Expect::kSetting, "ssh_port", "2222"},
    {{"-i", "/tmp/key"}, Expect::kSetting, "ssh_identity_file", "/tmp/key"},
    {{"--ssh-identity-file", "/tmp/key"}, Expect::kSetting, "ssh_identity_file", "/tmp/key"},
    {{"--fusion-threshold-mb", "32"}, Expect::kSetting, "fusion_threshold_mb", "32"},
    {{"--cycle-time-ms", "10"}, Expect::kSetting, "cycle_time_ms", "10"},
    {{"--cache-capacity", "2048"}, Expect::kSetting, "cache_capacity", "2048"},
    {{"--hierarchical-allreduce"}, Expect::kSetting, "hierarchical_allreduce", "on"},
    {{"--no-hierarchical-allreduce"}, Expect::kSetting, "hierarchical_allreduce", "off"},
    {{"--hierarchical-allgather"}, Expect::kNote},
    {{"--no-hierarchical-allgather"}, Expect::kNote},
    {{"--torus-allreduce"}, Expect::kNote},
    {{"--no-torus-allreduce"}, Expect::kNote},
    {{"--autotune"}, Expect::kRefused},
    {{"--no-autotune"}, Expect::kNote},
    {{"--autotune-log-file", "/tmp/tune.csv"}, Expect::kNote},
    {{"--autotune-warmup-samples", "5"}, Expect::kNote},
    {{"--autotune-steps-per-sample", "20"}, Expect::kNote},
    {{"--autotune-bayes-opt-max-samples", "50"}, Expect::kNote},
    {{"--autotune-gaussian-process-noise", "0.9"}, Expect::kNote},
    {{"--min-np", "2"}, Expect::kSetting, "min_np", "2"},
    {{"--min-num-proc", "2"}, Expect::kSetting, "min_np", "2"},
    {{"--max-np", "8"}, Expect::kSetting, "max_np", "8"},
    {{"--max-num-proc", "8"}, Expect::kSetting, "max_np", "8"},
    {{"--slots-per-host", "4"}, Expect::kSetting, "slots_per_host", "4"},
    {{"--elastic-timeout", "600"}, Expect::kSetting, "elastic_timeout_s", "600"},
    {{"--reset-limit", "3"}, Expect::kSetting, "reset_limit", "3"},
    {{"--blacklist-cooldown-range", "60", "300"}, Expect::kSetting, "blacklist_cooldown_range",
     "60,300"},
    {{"--timeline-filename", "/tmp/tl.json"}, Expect::kSetting, "timeline_filename",
     "/tmp/tl.json"},
    {{"--timeline-mark-cycles"}, Expect::kNote},
    {{"--no-timeline-mark-cycles"}, Expect::kNote},
    {{"--no-stall-check"}, Expect::kSetting, "stall_check", "false"},
    {{"--stall-check"}, Expect::kSetting, "stall_check", "true"},
    {{"--stall-check-warning-time-seconds", "120"}, Expect::kSetting, "stall_warning_s", "120"},
    {{"--stall-check-shutdown-time-seconds", "240"}, Expect::kSetting, "stall_shutdown_s",
     "240"},
    {{"--mpi-threads-disable"}, Expect::kNote},
    {{"--no-mpi-threads-disable"}, Expect::kNote},
    {{"--mpi-args", "--map-by ppr:6:node"}, Expect::kSetting, "mpi_args", "--map-by ppr:6:node"},
    {{"--tcp"}, Expect::kSetting, "network", "ethernet"},
    {{"--binding-args", "--rankfile f"}, Expect::kRefused},
    {{"--num-nccl-streams", "1"}, Expect::kNote},
    {{"--num-nccl-streams", "2"}, Expect::kRefused},
    {{"--thread-affinity", "1"}, Expect::kRefused},
    {{"--gloo-timeout-seconds", "60"}, Expect::kSetting, "op_timeout_s", "60"},
    {{"--log-level", "WARNING"}, Expect::kSetting, "log_level", "warn"},
    {{"--log-level", "FATAL"}, Expect::kSetting, "log_level", "error"},
    {{"--log-level", "INFO"}, Expect::kSetting, "log_level", "info"},
    {{"--log-with-timestamp"}, Expect::kSetting, "log_timestamps", "true"},
    {{"--log-without-timestamp"}, Expect::kSetting, "log_timestamps", "false"},
    {{"-prefix-timestamp"}, Expect::kSetting, "output_timestamps", "true"},
    {{"--prefix-output-with-timestamp"}, Expect::kSetting, "output_timestamps", "true"},
    {{"--log-hide-timestamp"}, Expect::kSetting, "log_timestamps", "false"},
    {{"--no-log-hide-timestamp"}, Expect::kSetting, "log_timestamps", "true"},
    {{"-H", "localhost:2"}, Expect::kLauncher},
    {{"--hosts", "localhost:2"}, Expect::kLauncher},
    {{"-hostfile", "HOSTFILE"}, Expect::kLauncher},
    {{"--hostfile", "HOSTFILE"}, Expect::kLauncher},
    {{"--host-discovery-script", "./discover.sh"}, Expect::kSetting, "host_discovery_script",
     "./discover.sh"},
    {{"--gloo"}, Expect::kNote},
    {{"--mpi"}, Expect::kSetting, "mpi", "true"},
    {{"--jsrun"}, Expect::kRefused},
    {{"--config-file", "CONFIG"}, Expect::kLauncher},
};

class HorovodrunFlagTest : public ::testing::TestWithParam<FlagCase> {
 protected:
  static std::string file_with(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_P(HorovodrunFlagTest, IsAcceptedWithItsEffect) {
  const FlagCase& c = GetParam();
  std::vector<std::string> args;
  for (const std::string& w : c.words) {
    if (w == "HOSTFILE") args.push_back(file_with("hosts", "localhost slots=2\n"));
    else if (w == "CONFIG") args.push_back(file_with("c.yaml", "params:\n  cycle_time_ms: 7\n"));
    else args.push_back(w);
  }
  args.push_back("python");
  args.push_back("train.py");
  auto r = parse_command_line(args, no_env);
  const std::string& flag = c.words[0];
  if (c.expect == Expect::kRefused) {
    ASSERT_FALSE(r.is_ok()) << flag;
    EXPECT_EQ(r.status().message().rfind(flag, 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find(": not supported: "), std::string::npos)
        << r.status().message();
    return;
  }
  ASSERT_TRUE(r.is_ok()) << flag << ": " << r.status().message();
  EXPECT_EQ(r->command, (std::vector<std::string>{"python", "train.py"})) << flag;
  switch (c.expect) {
    case Expect::kSetting:
      EXPECT_EQ(r->settings.text(c.setting), c.text) << flag;
      EXPECT_EQ(r->settings.source(c.setting), SettingSource::kFlag) << flag;
      EXPECT_TRUE(r->notes.empty()) << flag;
      break;
    case Expect::kNote:
      ASSERT_EQ(r->notes.size(), 1u) << flag;
      EXPECT_EQ(r->notes[0].rfind(flag, 0), 0u) << r->notes[0];
      EXPECT_NE(r->notes[0].find(" has no effect: "), std::string::npos) << r->notes[0];
      break;
    case Expect::kLauncher:
      if (flag == "-v" || flag == "--version") {
        EXPECT_TRUE(r->show_version);
      }
      if (flag == "-np" || flag == "--num-proc") {
        EXPECT_EQ(r->num_proc, 4);
      }
      if (flag == "-cb" || flag == "--check-build") {
        EXPECT_TRUE(r->check_build);
      }
      if (flag == "-H" || flag == "--hosts" || flag == "-hostfile" || flag == "--hostfile") {
        ASSERT_EQ(r->hosts.size(), 1u) << flag;
        EXPECT_EQ(r->hosts[0].slots, 2) << flag;
      }
      if (flag == "--config-file") {
        EXPECT_EQ(r->settings.text("cycle_time_ms"), "7");
        EXPECT_EQ(r->settings.source("cycle_time_ms"), SettingSource::kConfigFile);
      }
      break;
    case Expect::kRefused: break;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Horovod0281, HorovodrunFlagTest, ::testing::ValuesIn(kHorovodrunFlags),
    [](const ::testing::TestParamInfo<FlagCase>& flag_info) {
      std::string n;
      for (const std::string& w : flag_info.param.words)
        for (char ch : w) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return n + "_" + std::to_string(flag_info.index);
    });

TEST(HorovodrunFlagsTest, SwitchTakesNoValueAfterEquals) {
  auto r = parse_command_line({"--gloo=1", "true"}, no_env);
  ASSERT_FALSE(r.is_ok());
  // hvrun's own form of a switch with a bare meaning still takes one after '='.
  auto v = parse_command_line({"--hierarchical-allreduce=auto", "true"}, no_env);
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_EQ(v->settings.get(setting::kHierarchicalAllreduce), "auto");
}

TEST(HorovodrunFlagsTest, NetworkInterfacesAddUp) {
  auto r = parse_command_line(
      {"--network-interface", "eth0", "--network-interface", "eth1", "true"}, no_env);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->settings.get(setting::kNetworkInterface), "eth0,eth1");
}

TEST(HorovodrunFlagsTest, BadValuesAreRefusedAsHorovodrunDoes) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--autotune-warmup-samples", "-1", "true"},
           {"--autotune-gaussian-process-noise", "1.5", "true"},
           {"--fusion-threshold-mb", "-1", "true"},
           {"--log-level", "LOUD", "true"}}) {
    auto r = parse_command_line(args, no_env);
    ASSERT_FALSE(r.is_ok()) << args[0];
    EXPECT_NE(r.status().message().find(args[0]), std::string::npos) << r.status().message();
  }
}

// Horovod's own test file (test/single/data/config.test.yaml), less autotune.enabled, which
// hvrun refuses (it has no autotuner; see ConfigFileRefusesWhatHvrunCannotDo).
constexpr const char* kHorovodConfig = R"(controller: gloo

params:
  fusion_threshold_mb: 32
  cycle_time_ms: 10
  cache_capacity: 2048
  hierarchical_allreduce: true
  hierarchical_allgather: true

autotune:
  log_file: 'horovod_autotune_log.txt'
  warmup_samples: 5

timeline:
  filename: 'horovod_timeline.json'
  mark_cycles: true

stall_check:
  enabled: true
  warning_time_seconds: 120
  shutdown_time_seconds: 240

library_options:
  mpi_threads_disable: true
  num_nccl_streams: 1
  gloo_timeout_seconds: 60


logging:
  level: INFO
  hide_timestamp: true
)";

TEST(HorovodConfigFileTest, ReadsHorovodsFile) {
  const std::string path = ::testing::TempDir() + "/horovod.yaml";
  std::ofstream(path) << kHorovodConfig;
  auto r = parse_command_line({"--config-file", path, "python", "train.py"}, no_env);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const Settings& s = r->settings;
  EXPECT_DOUBLE_EQ(s.get(setting::kFusionThresholdMb), 32.0);
  EXPECT_DOUBLE_EQ(s.get(setting::kCycleTimeMs), 10.0);
  EXPECT_EQ(s.get(setting::kCacheCapacity), 2048);
  EXPECT_EQ(s.get(setting::kHierarchicalAllreduce), "on");
  EXPECT_EQ(s.get(setting::kTimelineFilename), "horovod_timeline.json");
  EXPECT_TRUE(s.get(setting::kStallCheck));
  EXPECT_DOUBLE_EQ(s.get(setting::kStallWarningSeconds), 120.0);
  EXPECT_DOUBLE_EQ(s.get(setting::kStallShutdownSeconds), 240.0);
  EXPECT_DOUBLE_EQ(s.get(setting::kOpTimeoutSeconds), 60.0);
  EXPECT_EQ(s.get(setting::kLogLevel), "info");
  EXPECT_EQ(s.source("cycle_time_ms"), SettingSource::kConfigFile);
  EXPECT_EQ(s.origin("cycle_time_ms"), path + ":5");
  // hide_timestamp is not a key Horovod's parser reads: reported, not applied.
  bool ignored_reported = false;
  for (const std::string& note : r->notes)
    ignored_reported |= note.find("logging.hide_timestamp") != std::string::npos;
  EXPECT_TRUE(ignored_reported);
  EXPECT_TRUE(s.get(setting::kLogTimestamps));
}

TEST(HorovodConfigFileTest, CommandLineWinsWhereverItStands) {
  const std::string path = ::testing::TempDir() + "/override.yaml";
  std::ofstream(path) << kHorovodConfig;
  auto r = parse_command_line({"--fusion-threshold-mb", "256", "--config-file", path,
                               "--cycle-time-ms", "20", "--no-hierarchical-allreduce", "true"},
                              [](const char* name) -> const char* {
                                return std::string(name) == "HOROVOD_CACHE_CAPACITY" ? "5"
                                                                                     : nullptr;
                              });
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->settings.get(setting::kFusionThresholdMb), 256.0);
  EXPECT_DOUBLE_EQ(r->settings.get(setting::kCycleTimeMs), 20.0);
  EXPECT_EQ(r->settings.get(setting::kHierarchicalAllreduce), "off");
  EXPECT_EQ(r->settings.get(setting::kCacheCapacity), 2048);  // the file beats the environment
}

TEST(HorovodConfigFileTest, ControllerMpiHandsTheJobToMpirunAsHorovodsMpiFlag) {
  const std::string path = ::testing::TempDir() + "/mpi.yaml";
  std::ofstream(path) << "controller: mpi\n";
  auto parsed = parse_command_line({"--config-file", path, "true"}, no_env);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  EXPECT_TRUE(parsed->settings.get(setting::kMpi));
}

TEST(HorovodConfigFileTest, ConfigFileRefusesWhatHvrunCannotDo) {
  for (const std::string& text : {std::string("autotune:\n  enabled: true\n")}) {
    auto r = parse_horovod_config(text, "c.yaml");
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const std::string path = ::testing::TempDir() + "/refused.yaml";
    std::ofstream(path) << text;
    auto parsed = parse_command_line({"--config-file", path, "true"}, no_env);
    ASSERT_FALSE(parsed.is_ok()) << text;
    EXPECT_NE(parsed.status().message().find("not supported"), std::string::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(path + ":"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(HorovodConfigFileTest, YamlBeyondHorovodsShapeIsAnErrorNamingTheLine) {
  for (const std::string& text :
       {std::string("params:\n  fusion_threshold_mb: [1, 2]\n"),
        std::string("params:\n  nested:\n    deeper: 1\n"),
        std::string("params:\n  - fusion_threshold_mb\n"),
        std::string("params:\n  cycle_time_ms: 1\n  cycle_time_ms: 2\n"),
        std::string("params:\n  cycle_time_ms: 'open\n"),
        std::string("  cycle_time_ms: 1\n"),
        std::string("params:\n  hierarchical_allreduce: maybe\n")}) {
    auto r = parse_horovod_config(text, "c.yaml");
    ASSERT_FALSE(r.is_ok()) << text;
    EXPECT_EQ(r.status().message().rfind("c.yaml:", 0), 0u) << r.status().message();
  }
}

TEST(HorovodConfigFileTest, CommentsQuotesAndNulls) {
  auto r = parse_horovod_config(
      "# Horovod parameters\n---\nparams:   # tuning\n  cycle_time_ms: 2.5  # ms\n"
      "  cache_capacity: ~\ntimeline:\n  filename: \"/tmp/a #b.json\"\n",
      "c.yaml");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->flags.size(), 2u);
  EXPECT_EQ(r->flags[0].flag, "--cycle-time-ms");
  EXPECT_EQ(*r->flags[0].value, "2.5");
  EXPECT_EQ(r->flags[1].flag, "--timeline-filename");
  EXPECT_EQ(*r->flags[1].value, "/tmp/a #b.json");
}

}  // namespace
}  // namespace hvrun::launcher
