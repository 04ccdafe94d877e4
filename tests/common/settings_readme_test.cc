// Every setting's flag and variable must be documented in README.md.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/settings.h"
#include "tests/support/subprocess.h"

namespace hvrun {
namespace {

TEST(SettingsReadmeTest, EveryFlagAndVariableIsDocumented) {
  std::ifstream in(test::source_dir() + "/README.md");
  ASSERT_TRUE(in) << "README.md not found";
  std::stringstream buf;
  buf << in.rdbuf();
  std::string readme = buf.str();
  for (const SettingSpec& s : all_settings()) {
    EXPECT_NE(readme.find("`" + std::string(s.flag)), std::string::npos)
        << s.flag << " is not in README.md's settings table";
    EXPECT_NE(readme.find("`" + std::string(s.env) + "`"), std::string::npos)
        << s.env << " is not in README.md's settings table";
  }
}

}  // namespace
}  // namespace hvrun
