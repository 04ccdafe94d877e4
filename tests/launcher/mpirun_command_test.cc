// hvrun --mpi's mpirun command line and the splitting of --mpi-args.
#include "launcher/mpi/mpirun_command.h"

#include <gtest/gtest.h>

namespace hvrun::launcher {
namespace {

using Words = std::vector<std::string>;

TEST(MpirunCommandTest, ShapeExportsByNameAndTheUsersArguments) {
  MpirunJob job;
  job.mpirun = "/usr/bin/mpirun";
  job.size = 4;
  job.hosts = {{"a", 2}, {"b", 2}};
  job.exported = {"HVRUN_COORDINATOR_ADDR", "HVRUN_SECRET"};
  job.mpi_args = {"--mca", "btl", "self,tcp"};
  job.command = {"python", "train.py"};
  EXPECT_EQ(mpirun_command(job),
            (Words{"/usr/bin/mpirun", "-np", "4", "-H", "a:2,b:2", "--bind-to", "none",
                   "--map-by", "slot", "--tag-output", "-x", "HVRUN_COORDINATOR_ADDR", "-x",
                   "HVRUN_SECRET", "--mca", "btl", "self,tcp", "python", "train.py"}));
  job.tag_output = false;
  EXPECT_EQ(mpirun_command(job)[9], "-x");
}

TEST(MpirunCommandTest, MpiArgsSplitLikeAShell) {
  EXPECT_EQ(*split_shell_words("  --mca btl  self,tcp "), (Words{"--mca", "btl", "self,tcp"}));
  EXPECT_EQ(*split_shell_words("--mca plm_rsh_args '-p 2222 -i /k'"),
            (Words{"--mca", "plm_rsh_args", "-p 2222 -i /k"}));
  EXPECT_EQ(*split_shell_words(R"(-x "A=b c" -x B=\"q\" C=it\'s)"),
            (Words{"-x", "A=b c", "-x", "B=\"q\"", "C=it's"}));
  EXPECT_EQ(*split_shell_words("''"), (Words{""}));
  EXPECT_TRUE(split_shell_words("")->empty());
  auto bad = split_shell_words("--mca 'x");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("unterminated single quote"), std::string::npos);
}

}  // namespace
}  // namespace hvrun::launcher
