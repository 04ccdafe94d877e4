// hvrun with workers that use the worker library: the coordinator's verdicts (abort, lost
// worker, registration timeout) end the job like a failed worker does.
#include <gtest/gtest.h>
#include <signal.h>

#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

RunOptions cpu_job() {
  RunOptions opts;
  opts.env["HVRUN_DEVICE"] = "cpu";
  opts.timeout = std::chrono::milliseconds(20000);
  return opts;
}

TEST(HvrunControlPlaneTest, LibraryWorkersRegisterAndFinish) {
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "2", "-H", "localhost:2", bin_path("launcher_test_worker"), "barrier"},
      cpu_job());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>:rank 0 passed the barrier"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1]<stdout>:rank 1 passed the barrier"), std::string::npos) << r.out;
}

TEST(HvrunControlPlaneTest, AbortByAWorkerEndsTheJobAndSaysWhy) {
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "3", "--grace-period", "2", bin_path("launcher_test_worker"), "abort", "1"},
      cpu_job());
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.elapsed.count(), 6000) << r.err;
  EXPECT_NE(r.err.find("rank 1 gave up"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hvrun: job failed"), std::string::npos) << r.err;
}

TEST(HvrunControlPlaneTest, LostWorkerEndsTheJobNamingTheRank) {
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "2", "--grace-period", "2", bin_path("launcher_test_worker"), "crash", "1"},
      cpu_job());
  // Rank 1's death is seen twice: its exit (SIGKILL, 137) and its lost stream (1). The exit is
  // preferred when hvrun has seen it, which is nearly always.
  EXPECT_TRUE(r.exit_code == 128 + SIGKILL || r.exit_code == 1) << r.exit_code << "\n" << r.err;
  EXPECT_LT(r.elapsed.count(), 6000) << r.err;
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
}

TEST(HvrunControlPlaneTest, RegistrationTimeoutNamesTheMissingRank) {
  RunResult r = run_process({bin_path("hvrun"), "-np", "2", "--start-timeout", "1",
                             "--grace-period", "1", bin_path("launcher_test_worker"),
                             "register-only"},
                            cpu_job());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(r.elapsed.count(), 8000) << r.err;
  EXPECT_NE(r.err.find("missing rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hvrun: job failed: registration failed"), std::string::npos) << r.err;
}

// A rank that exits (with code 0) before it ever calls init can never register: the job fails
// at once naming it and how it ended, not after the 30 s start timeout.
TEST(HvrunControlPlaneTest, ARankExitingBeforeInitFailsTheJobAtOnceNamingIt) {
  RunResult r = run_process({bin_path("hvrun"), "-np", "3", "--start-timeout", "30",
                             "--grace-period", "2", bin_path("launcher_test_worker"), "early",
                             "1"},
                            cpu_job());
  EXPECT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(r.elapsed.count(), 5000) << "waited for the start timeout?\n" << r.err;
  const size_t head = r.err.find("hvrun: job failed: ");
  ASSERT_NE(head, std::string::npos) << r.err;
  const std::string line = r.err.substr(head, r.err.find('\n', head) - head);
  EXPECT_NE(line.find("rank 1 (host localhost, local rank 1) exited with code 0 before "
                      "registering"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(line.find("rendezvous timed out"), std::string::npos) << r.err;
}

// The coordinator's unix socket is for this user only, whatever the umask: mode 0600, in a
// directory of mode 0700 made for it; both are gone after the job.
TEST(HvrunControlPlaneTest, TheCoordinatorSocketIsPrivateWhateverTheUmask) {
  RunResult r = run_process({"/bin/sh", "-c", "umask 000; exec \"$0\" \"$@\"", bin_path("hvrun"),
                             "-np", "1", bin_path("launcher_test_worker"), "socket-mode"},
                            cpu_job());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[0]<stdout>:socket 600 dir 700\n"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hvrun::test
