// The card on which a job's hvrun publishes its autopsy directory for `hvrun dump`
// (launcher/autopsy/report_directory_card.h): read back for this process, made absolute, gone
// with its owner, and not trusted when it does not belong to the process it names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launcher/autopsy/report_directory_card.h"

namespace hvrun::launcher {
namespace {

TEST(ReportDirectoryCard, IsReadBackForThisProcessAbsoluteAndRemovedWithIt) {
  const pid_t self = ::getpid();
  {
    const ReportDirectoryCard card("reports/here");
    ASSERT_FALSE(card.path().empty());
    EXPECT_EQ(card.path(), report_directory_card_path(self));
    const auto read = read_report_directory_card(self);
    ASSERT_TRUE(read.has_value());
    EXPECT_EQ(*read, (std::filesystem::current_path() / "reports/here").string());
  }
  EXPECT_FALSE(std::filesystem::exists(report_directory_card_path(self)));
  EXPECT_FALSE(read_report_directory_card(self).has_value());
}

TEST(ReportDirectoryCard, ACardOfAnotherProcessUnderTheSamePidIsIgnored) {
  const pid_t self = ::getpid();
  const std::string path = report_directory_card_path(self);
  {
    // What a process that had this pid before (another start time) left behind.
    std::ofstream out(path);
    out << "start_time 1\nautopsy_dir /somewhere/else\n";
  }
  EXPECT_FALSE(read_report_directory_card(self).has_value());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hvrun::launcher
