// A trainer started without a launcher runs as a job of size 1, as Horovod does: init() starts
// hvrun-coordinator as a child of its own, every collective works, the child is reaped and its
// socket directory removed by the end; under another launcher's several ranks it refuses.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

// A launcher's variables taken away, as for `./train` typed in a shell.
RunOptions without_launcher() {
  RunOptions options;
  for (const char* name : {"HVRUN_COORDINATOR_ADDR", "HVRUN_SECRET", "HVRUN_RANK",
                           "HVRUN_LOCAL_RANK", "HVRUN_JOB_ID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                           "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"})
    options.env[name] = std::nullopt;
  options.timeout = std::chrono::seconds(120);
  return options;
}

TEST(SingleProcess, EveryCollectiveRunsAsAJobOfSizeOne) {
  RunResult r = run_process({bin_path("hvrun_test_worker"), "collectives"}, without_launcher());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("rank 0: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" 0 failures"), std::string::npos) << r.out;
  // Said once, at info level, with the child's pid; by the end the child is gone.
  std::smatch m;
  const std::regex said(
      R"(\[info\] no launcher .*a job of size 1, )"
      R"(with a coordinator of its own \((.*), pid (\d+)\))");
  ASSERT_TRUE(std::regex_search(r.err, m, said)) << r.err;
  const pid_t daemon = static_cast<pid_t>(std::stol(m[2].str()));
  EXPECT_EQ(::kill(daemon, 0), -1);
  EXPECT_EQ(errno, ESRCH) << "the private coordinator (pid " << daemon << ") outlived its trainer";
  std::smatch dir;
  const std::regex socket_dir(R"(listening on unix:(/tmp/hvrun-solo-\w+)/)");
  ASSERT_TRUE(std::regex_search(r.err, dir, socket_dir)) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir[1].str())) << dir[1].str();
}

TEST(SingleProcess, CApiRunsAsAJobOfSizeOne) {
  RunResult r = run_process({bin_path("hvrun_c_api_test")}, without_launcher());
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("rank 0: c api checks ok"), std::string::npos) << r.out;
}

// A secret left in the environment is the job's: the private coordinator reads it too.
TEST(SingleProcess, ASecretInTheEnvironmentIsUsed) {
  RunOptions options = without_launcher();
  options.env["HVRUN_SECRET"] = "left-in-the-environment";
  RunResult r = run_process({bin_path("hvrun_c_api_test")}, options);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("rank 0: c api checks ok"), std::string::npos) << r.out;
}

TEST(SingleProcess, AnotherLaunchersRanksAreNotRunAsJobsOfOne) {
  RunOptions options = without_launcher();
  options.env["OMPI_COMM_WORLD_SIZE"] = "4";
  RunResult r = run_process({bin_path("hvrun_test_worker"), "collectives"}, options);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("another launcher started 4 ranks (OMPI_COMM_WORLD_SIZE=4)"),
            std::string::npos)
      << r.err;
}

TEST(SingleProcess, HorovodVariablesReachThePrivateCoordinator) {
  // A Horovod setting in Horovod's units, and a name Horovod does not have (one warning).
  RunOptions options = without_launcher();
  options.env["HOROVOD_CYCLE_TIME"] = "2";
  options.env["HOROVOD_TORUS_ALLREDUCE"] = "1";
  options.env["HOROVOD_NO_SUCH_KNOB"] = "1";
  RunResult r = run_process({bin_path("hvrun_test_worker"), "collectives"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[info] HOROVOD_TORUS_ALLREDUCE=1 has no effect"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("[warning] ignoring HOROVOD_NO_SUCH_KNOB"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hvrun::test
