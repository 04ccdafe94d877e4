// Every setting's flag and variable must be documented in docs/settings.md, the settings manual.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/settings.h"
#include "tests/support/subprocess.h"

namespace hvrun {
namespace {

// A flag is documented as `--flag` or `--flag VALUE`; matching the bare prefix would let
// `--fast-path-wait-ms` stand in for `--fast-path`.
bool documents_flag(const std::string& manual, const std::string& flag) {
  return manual.find("`" + flag + "`") != std::string::npos ||
         manual.find("`" + flag + " ") != std::string::npos;
}

TEST(SettingsDocTest, EveryFlagAndVariableIsDocumented) {
  const std::string path = test::source_dir() + "/docs/settings.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " not found";
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string manual = buf.str();
  for (const SettingSpec& s : all_settings()) {
    EXPECT_TRUE(documents_flag(manual, std::string(s.flag)))
        << s.flag << " is not in docs/settings.md's settings table";
    EXPECT_NE(manual.find("`" + std::string(s.env) + "`"), std::string::npos)
        << s.env << " is not in docs/settings.md's settings table";
  }
}

}  // namespace
}  // namespace hvrun
