#include "common/settings.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/setting_keys.h"
#include "tests/support/environment_map.h"

namespace hvrun {
namespace {

TEST(SettingsCatalogTest, EverySettingIsWellFormed) {
  std::set<std::string_view> names, flags, envs;
  for (const SettingSpec& s : all_settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate name " << s.name;
    EXPECT_TRUE(flags.insert(s.flag).second) << "duplicate flag " << s.flag;
    EXPECT_TRUE(envs.insert(s.env).second) << "duplicate variable " << s.env;
    EXPECT_EQ(s.flag.substr(0, 2), "--") << s.name;
    EXPECT_EQ(s.env.substr(0, 6), "HVRUN_") << s.name;
    EXPECT_FALSE(s.description.empty()) << s.name;
    EXPECT_TRUE(parse_setting_value(s, s.default_value, "default").is_ok())
        << "default of " << s.name << " does not parse";
  }
}

TEST(SettingsTest, DefaultsAreTyped) {
  Settings s;
  EXPECT_DOUBLE_EQ(s.get(setting::kFusionThresholdMb), 128.0);
  EXPECT_DOUBLE_EQ(s.get(setting::kCycleTimeMs), 1.0);
  EXPECT_EQ(s.get(setting::kCacheCapacity), 1024);
  EXPECT_DOUBLE_EQ(s.get(setting::kStartTimeoutSeconds), 30.0);
  EXPECT_FALSE(s.get(setting::kVerbose));
  EXPECT_EQ(s.get(setting::kLogLevel), "info");
  EXPECT_EQ(s.source("fusion_threshold_mb"), SettingSource::kDefault);
}

TEST(SettingsTest, FlagBeatsEnvironmentBeatsDefault) {
  std::map<std::string, std::string> env{{"HVRUN_FUSION_THRESHOLD", "64"},
                                         {"HVRUN_CACHE_CAPACITY", "0"}};
  Settings s;
  ASSERT_TRUE(s.apply_environment(test::environment_of(env)).is_ok());
  EXPECT_DOUBLE_EQ(s.get(setting::kFusionThresholdMb), 64.0);
  EXPECT_EQ(s.source("fusion_threshold_mb"), SettingSource::kEnvironment);
  ASSERT_TRUE(s.apply_flag("--fusion-threshold-mb", "32", true).is_ok());
  EXPECT_DOUBLE_EQ(s.get(setting::kFusionThresholdMb), 32.0);
  EXPECT_EQ(s.source("fusion_threshold_mb"), SettingSource::kFlag);
  EXPECT_EQ(s.get(setting::kCacheCapacity), 0);
  ASSERT_TRUE(s.apply_flag("--verbose", "", false).is_ok());
  EXPECT_TRUE(s.get(setting::kVerbose));
}

TEST(SettingsTest, BadValuesNameTheSettingTheValueAndWhatIsAccepted) {
  std::map<std::string, std::string> env{{"HVRUN_FUSION_THRESHOLD", "abc"}};
  Settings s;
  Status st = s.apply_environment(test::environment_of(env));
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("HVRUN_FUSION_THRESHOLD"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'abc'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("from 0 to 65536"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << "must be one line";

  EXPECT_FALSE(s.apply_flag("--cache-capacity", "-1", true).is_ok());
  EXPECT_FALSE(s.apply_flag("--cache-capacity", "12x", true).is_ok());
  EXPECT_FALSE(s.apply_flag("--cache-capacity", "1.5", true).is_ok());
  EXPECT_FALSE(s.apply_flag("--cycle-time-ms", "nan", true).is_ok());
  EXPECT_FALSE(s.apply_flag("--cycle-time-ms", "", true).is_ok());
  Status choice = s.apply_flag("--nccl-p2p", "maybe", true);
  EXPECT_NE(choice.message().find("one of auto, on, off"), std::string::npos) << choice.message();
  Status missing = s.apply_flag("--cache-capacity", "", false);
  EXPECT_NE(missing.message().find("needs a value"), std::string::npos) << missing.message();
  // A failed set leaves the old value in place.
  EXPECT_EQ(s.get(setting::kCacheCapacity), 1024);
}

// Numbers are read exactly as written: no hex, no padding, no trailing words, nothing out of
// range of the type; each refusal names the variable and the value.
TEST(SettingsTest, NumbersParseStrictly) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"HVRUN_CYCLE_TIME", "0x10"},          {"HVRUN_CYCLE_TIME", " 5"},
      {"HVRUN_CYCLE_TIME", "5 "},            {"HVRUN_CYCLE_TIME", "5ms"},
      {"HVRUN_CYCLE_TIME", "inf"},           {"HVRUN_CYCLE_TIME", "1e"},
      {"HVRUN_CYCLE_TIME", "."},             {"HVRUN_CYCLE_TIME", "1e999"},
      {"HVRUN_CACHE_CAPACITY", "0x10"},      {"HVRUN_CACHE_CAPACITY", " 5"},
      {"HVRUN_CACHE_CAPACITY", "5\n"},       {"HVRUN_CACHE_CAPACITY", "+5"},
      {"HVRUN_CACHE_CAPACITY", "99999999999999999999999"},
  };
  for (const auto& [name, value] : bad) {
    std::map<std::string, std::string> env{{name, value}};
    Settings s;
    Status st = s.apply_environment(test::environment_of(env));
    ASSERT_FALSE(st.is_ok()) << name << "='" << value << "' was accepted";
    EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("'" + value + "'"), std::string::npos) << st.message();
  }
  Settings s;
  for (const char* good : {"16", "0.25", "-0", "1e1", "2.", ".5", "1E+1"})
    EXPECT_TRUE(s.apply_flag("--cycle-time-ms", good, true).is_ok()) << good;
  EXPECT_TRUE(s.apply_flag("--cache-capacity", "0", true).is_ok());
}

TEST(SettingsTest, AcceptsCommonSpellings) {
  Settings s;
  for (const char* yes : {"1", "true", "YES", "on", " On "}) {
    ASSERT_TRUE(s.apply_flag("--verbose", yes, true).is_ok()) << yes;
    EXPECT_TRUE(s.get(setting::kVerbose)) << yes;
  }
  ASSERT_TRUE(s.apply_flag("--nccl-p2p", "OFF", true).is_ok());
  EXPECT_EQ(s.get(setting::kNcclP2p), "off");
  ASSERT_TRUE(s.apply_flag("--fusion-threshold-mb", "0.5", true).is_ok());
  EXPECT_DOUBLE_EQ(s.get(setting::kFusionThresholdMb), 0.5);
}

TEST(SettingsTest, PrintShowsValueAndSource) {
  std::map<std::string, std::string> env{{"HVRUN_CYCLE_TIME", "2.5"}};
  Settings s;
  ASSERT_TRUE(s.apply_environment(test::environment_of(env)).is_ok());
  ASSERT_TRUE(s.apply_flag("--cache-capacity", "7", true).is_ok());
  std::ostringstream out;
  s.print(out);
  std::string text = out.str();
  for (const SettingSpec& spec : all_settings())
    EXPECT_NE(text.find(spec.name), std::string::npos) << spec.name;
  EXPECT_NE(text.find("2.5"), std::string::npos);
  EXPECT_NE(text.find("environment"), std::string::npos);
  EXPECT_NE(text.find("flag"), std::string::npos);

  auto env_out = s.non_default_environment();
  ASSERT_EQ(env_out.size(), 2u);
}

}  // namespace
}  // namespace hvrun
