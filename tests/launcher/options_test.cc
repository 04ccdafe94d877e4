#include "launcher/options/options.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/setting_keys.h"

namespace hvrun::launcher {
namespace {

const char* no_env(const char*) { return nullptr; }

TEST(LaunchOptionsTest, ParsesHorovodStyleCommandLine) {
  auto r = parse_command_line({"-np", "2", "-H", "localhost:2", "--fusion-threshold-mb", "64",
                               "--verbose", "./train", "--epochs", "3"},
                              no_env);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->num_proc, 2);
  ASSERT_EQ(r->hosts.size(), 1u);
  EXPECT_EQ(r->hosts[0].host, "localhost");
  EXPECT_EQ(r->hosts[0].slots, 2);
  EXPECT_DOUBLE_EQ(r->settings.get(setting::kFusionThresholdMb), 64.0);
  EXPECT_TRUE(r->settings.get(setting::kVerbose));
  EXPECT_EQ(r->command, (std::vector<std::string>{"./train", "--epochs", "3"}));
}

TEST(LaunchOptionsTest, InlineValuesAndDoubleDash) {
  auto r = parse_command_line({"--num-proc=3", "--cycle-time-ms=0.5", "--", "-weird-name"},
                              no_env);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->num_proc, 3);
  EXPECT_DOUBLE_EQ(r->settings.get(setting::kCycleTimeMs), 0.5);
  EXPECT_EQ(r->command, (std::vector<std::string>{"-weird-name"}));
}

TEST(LaunchOptionsTest, RejectsBadInputWithOneLine) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-np", "0", "true"},
           {"-H", "host:", "true"},
           {"-H", ":2", "true"},
           {"-H", "a:x", "true"},
           {"--no-such-flag", "true"},
           {"-np"},
           {"--cache-capacity", "lots", "true"}}) {
    auto r = parse_command_line(args, no_env);
    ASSERT_FALSE(r.is_ok()) << args[0];
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status().message();
  }
}

TEST(LaunchOptionsTest, EnvironmentSettingErrorNamesTheVariable) {
  auto r = parse_command_line({"--print-config"}, [](const char* name) -> const char* {
    return std::string(name) == "HVRUN_FUSION_THRESHOLD" ? "abc" : nullptr;
  });
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("HVRUN_FUSION_THRESHOLD"), std::string::npos);
}

// Writes `text` to the hostfile at `path` and reads it back.
Result<std::vector<HostSlots>> read_hostfile_text(const std::string& path,
                                                  const std::string& text) {
  {
    std::ofstream f(path);
    f << text;
  }
  return read_hostfile(path);
}

TEST(LaunchOptionsTest, ReadsHostfile) {
  std::string path = ::testing::TempDir() + "/hosts.txt";
  auto hosts =
      read_hostfile_text(path, "# cluster\nnode1 slots=4\n\nnode2 slots=2  # spare\nnode3\n");
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().message();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].host, "node1");
  EXPECT_EQ((*hosts)[0].slots, 4);
  EXPECT_EQ((*hosts)[1].slots, 2);
  EXPECT_EQ((*hosts)[2].slots, 1);
  EXPECT_FALSE(read_hostfile_text(path, "node1 cpus=4\n").is_ok());
  EXPECT_FALSE(read_hostfile(path + ".missing").is_ok());
}

// "host:N" is read as -H reads it; slots given twice, or a malformed count, is an error that
// names the file's line, never a silent choice of one of them or a host name with a colon.
TEST(LaunchOptionsTest, HostfileTakesTheMinusHFormAndRefusesAmbiguousLines) {
  std::string path = ::testing::TempDir() + "/hosts-forms.txt";
  auto hosts = read_hostfile_text(
      path, "localhost:2\nnode2 slots=3\nfe80::1 slots=2\n::1\n[fd00::7]:4\n");
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().message();
  ASSERT_EQ(hosts->size(), 5u);
  EXPECT_EQ((*hosts)[0].host, "localhost");
  EXPECT_EQ((*hosts)[0].slots, 2);
  EXPECT_EQ((*hosts)[1].host, "node2");
  EXPECT_EQ((*hosts)[1].slots, 3);
  // IPv6 addresses keep their colons: slots come from "slots=N" or "[address]:N".
  EXPECT_EQ((*hosts)[2].host, "fe80::1");
  EXPECT_EQ((*hosts)[2].slots, 2);
  EXPECT_EQ((*hosts)[3].host, "::1");
  EXPECT_EQ((*hosts)[3].slots, 1);
  EXPECT_EQ((*hosts)[4].host, "fd00::7");
  EXPECT_EQ((*hosts)[4].slots, 4);
  for (const char* bad : {"node0 slots=1 slots=3", "localhost:2 slots=3", "localhost:x", ":2",
                          "localhost:0", "localhost slots=", "localhost slots=2x"}) {
    auto r = read_hostfile_text(path, "# first line\nnode1 slots=1\n" + std::string(bad) + "\n");
    ASSERT_FALSE(r.is_ok()) << "'" << bad << "' was accepted";
    EXPECT_NE(r.status().message().find("line 3"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace hvrun::launcher
