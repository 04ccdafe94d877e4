// The health check's pieces (launcher/health/): its arguments, the built-in checks on this
// machine (free disk, an interface's link, NVML through a stand-in library: no GPU here), the
// script with its timeout, and `hvrun health-check` as hvrun runs it on a host.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>

#include "launcher/health/health_checks.h"
#include "launcher/health/health_options.h"
#include "launcher/health/host_health.h"
#include "tests/support/subprocess.h"

namespace hvrun::launcher {
namespace {

using std::chrono::milliseconds;

TEST(HealthOptions, ArgumentsCarryEveryCheckToTheHost) {
  HostCheckRequest request;
  request.slots = 4;
  request.options.enabled = true;
  request.options.script = "test -e '/data/ok file'";
  request.options.timeout = milliseconds(2500);
  request.options.min_free_disk_mb = 77;
  request.options.disk_path = "/ckpt";
  request.options.interfaces = {"eth1", "ens5"};
  auto parsed = parse_health_check_arguments(health_check_arguments(request));
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  EXPECT_EQ(parsed->slots, 4);
  EXPECT_EQ(parsed->options.script, request.options.script);
  EXPECT_EQ(parsed->options.timeout, milliseconds(2500));
  EXPECT_EQ(parsed->options.min_free_disk_mb, 77);
  EXPECT_EQ(parsed->options.disk_path, "/ckpt");
  EXPECT_EQ(parsed->options.interfaces, (std::vector<std::string>{"eth1", "ens5"}));
  EXPECT_TRUE(parsed->options.pins_gpus);
  request.options.pins_gpus = false;  // --device cpu: no GPU is pinned
  EXPECT_FALSE(parse_health_check_arguments(health_check_arguments(request))->options.pins_gpus);
  EXPECT_FALSE(parse_health_check_arguments({"--gpus", "x"}).is_ok());
  EXPECT_FALSE(parse_health_check_arguments({"--frobnicate", "1"}).is_ok());
}

TEST(HealthChecks, TooLittleFreeDiskIsRefusedNamingThePlaceAndTheFigures) {
  EXPECT_EQ(check_free_disk("/tmp", 1), "");
  EXPECT_EQ(check_free_disk("/tmp", 0), "");
  // A directory not made yet: its nearest existing parent is measured.
  EXPECT_EQ(check_free_disk("/tmp/hvrun-health-not-made-yet/ckpt", 1), "");
  const std::string refused = check_free_disk("/tmp", int64_t{1} << 40);  // an exbibyte
  EXPECT_NE(refused.find("MiB free on /tmp, below 1099511627776 MiB (--health-min-free-disk)"),
            std::string::npos)
      << refused;
}

TEST(HealthChecks, TheDataInterfaceMustBeUpWithALink) {
  EXPECT_EQ(check_link({}), "");                       // none named: checked by probing instead
  EXPECT_EQ(check_link({"hvrun-nosuch0", "lo"}), "");  // the first this host has: lo, up
  const std::string none = check_link({"hvrun-nosuch0", "hvrun-nosuch1"});
  EXPECT_NE(none.find("none of the data interfaces named by --network-interface "
                      "(hvrun-nosuch0,hvrun-nosuch1) is on this host"),
            std::string::npos)
      << none;
}

TEST(HealthChecks, AHostWithoutNvmlPassesSayingNoGpu) {
  std::vector<std::string> notes;
  EXPECT_EQ(check_gpus(2, notes, "libhvrun-no-such-nvml.so.1"), "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no GPU"), std::string::npos) << notes[0];
  notes.clear();
  EXPECT_EQ(check_gpus(0, notes, "libhvrun-no-such-nvml.so.1"), "");  // a CPU job
  EXPECT_TRUE(notes.empty());
}

// NVML's answers come from a stand-in library (tests/launcher/fake_nvml_health/): what the
// check makes of them, not what a driver says, is tested here.
TEST(HealthChecks, PinnedGpusMustAnswerWithoutEccErrorsOrPendingRetirements) {
  const std::string library = HVRUN_TEST_FAKE_NVML;
  std::vector<std::string> notes;
  ::unsetenv("FAKE_NVML_FAULT");
  EXPECT_EQ(check_gpus(2, notes, library), "");
  EXPECT_TRUE(notes.empty());
  ::setenv("FAKE_NVML_FAULT", "ecc", 1);
  EXPECT_EQ(check_gpus(1, notes, library), "") << "GPU 1 is pinned by no rank";
  EXPECT_EQ(check_gpus(2, notes, library),
            "GPU 1 GPU-fake0001 reports 3 uncorrected ECC error(s) since the driver loaded");
  ::setenv("FAKE_NVML_FAULT", "pages", 1);
  EXPECT_EQ(check_gpus(2, notes, library),
            "GPU 1 GPU-fake0001 has retired memory pages waiting for a GPU reset");
  ::setenv("FAKE_NVML_FAULT", "lost", 1);
  EXPECT_EQ(check_gpus(8, notes, library), "GPU 1 does not answer (NVML error 15 (GPU is lost))");
  ::unsetenv("FAKE_NVML_FAULT");
}

TEST(HealthChecks, TheScriptSaysWhyInOneLineAndIsBoundedByItsTimeout) {
  EXPECT_EQ(run_health_script("exit 0", milliseconds(5000)), "");
  EXPECT_EQ(
      run_health_script("echo; echo '  disk controller reports errors  ' >&2; echo more; exit 3",
                        milliseconds(5000)),
      "disk controller reports errors (--health-check-script exited with code 3)");
  EXPECT_EQ(run_health_script("exit 1", milliseconds(5000)),
            "--health-check-script said nothing (--health-check-script exited with code 1)");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(run_health_script("sleep 30", milliseconds(500)),
            "--health-check-script did not answer within 0.5 s (--health-check-timeout)");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

// `hvrun health-check` as hvrun runs it on a host, and what hvrun makes of its answer.
TEST(HostHealth, TheHostsAnswerIsReadAndAFailedCommandIsUnhealthy) {
  const std::string hvrun = test::bin_path("hvrun");
  HealthVerdict ok = run_host_check({hvrun, "health-check", "--gpus", "0"}, milliseconds(20000));
  EXPECT_TRUE(ok.healthy) << ok.reason;
  HealthVerdict sick = run_host_check(
      {hvrun, "health-check", "--script", "echo fan 2 stopped; exit 1"}, milliseconds(20000));
  EXPECT_FALSE(sick.healthy);
  EXPECT_EQ(sick.reason, "fan 2 stopped (--health-check-script exited with code 1)");
  HealthVerdict unreachable =
      run_host_check({"sh", "-c",
                      "echo 'ssh: connect to host b port 22: Connection refused' >&2; "
                      "exit 255"},
                     milliseconds(20000));
  EXPECT_FALSE(unreachable.healthy);
  EXPECT_EQ(unreachable.reason,
            "its health check did not run (exit code 255): ssh: connect to "
            "host b port 22: Connection refused");
  const auto started = std::chrono::steady_clock::now();
  HealthVerdict hung = run_host_check({"sleep", "30"}, milliseconds(300));
  EXPECT_FALSE(hung.healthy);
  EXPECT_EQ(hung.reason, "its health check did not answer within 0.3 s");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

}  // namespace
}  // namespace hvrun::launcher
