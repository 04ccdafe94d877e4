// Health before membership (docs/elastic.md, "Health"), through the real hvrun:
// - on this machine alone: a fixed job whose host fails its check starts no rank and names the
//   host and the reason (the script's, or too little free disk), as does an elastic job left
//   short of --min-np by its failing hosts; an elastic job's host that
//   fails its check when the discovery script offers a slot gets no rank, is named, and gets
//   the slot after its cool-down once its check passes (a script whose answer changes);
// - in a network namespace of the test's own (root): a data interface set down is refused by
//   the built-in link check, and passes once it is up with a link;
// - across two namespace hosts (scripts/netns-cluster up DIR 2, root): hostB, named in -H but
//   failing the script on hostB itself, is left out of the first membership and never given
//   ranks while it fails, and joins after its cool-down once healthy.
//
// Every wait is bounded; every process is found and killed by pid.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/host_processes.h"
#include "tests/support/namespace_hosts.h"
#include "tests/support/subprocess.h"

namespace hvrun::test {
namespace {

using std::chrono::seconds;

void write_text(const std::string& path, const std::string& text) {
  // Written aside and renamed: the discovery script never reads half of it.
  std::ofstream(path + ".part") << text;
  std::filesystem::rename(path + ".part", path);
}

// Waits (bounded) until `path` holds `what`; its text either way.
std::string wait_for_text(const std::string& path, const std::string& what, seconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  std::string text = read_file(path);
  while (text.find(what) == std::string::npos && std::chrono::steady_clock::now() < until) {
    ::usleep(100000);
    text = read_file(path);
  }
  return text;
}

// "hostB's script" for the health check: unhealthy, saying `reason`, while `sick` exists
// (and, when `only_on` is set, only on the host whose hostname that is).
std::string sick_while(const std::string& sick, const std::string& reason,
                       const std::string& only_on = "") {
  const std::string on = only_on.empty() ? "" : "[ \"$(hostname)\" = " + only_on + " ] && ";
  return "if " + on + "[ -e " + sick + " ]; then echo '" + reason + "'; exit 1; fi; exit 0";
}

class HealthOneHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/hvrun-health-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (pid_t pid : processes_running(bin_path("hvrun_elastic_grow_job"))) ::kill(pid, SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

// A fixed job: the host fails the script, so no rank ever starts; hvrun names host and reason.
TEST_F(HealthOneHostTest, AFixedJobWhoseHostFailsTheScriptStartsNoRank) {
  const std::string ran = dir_ + "/ran";
  RunResult r =
      run_process({bin_path("hvrun"), "-np", "2", "--health-check-script",
                   "echo \"fan 2 stopped on $(hostname)\"; exit 1", "sh", "-c", "touch " + ran},
                  {.timeout = std::chrono::milliseconds(60000)});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("hvrun: health check failed before any rank started: host \\S+: fan 2 "
                        "stopped on \\S+ \\(--health-check-script exited with code 1\\)")))
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(ran)) << "a rank ran on an unhealthy host";
}

// Too little free space on the checkpoint/output directory (a threshold above what it has).
TEST_F(HealthOneHostTest, TooLittleFreeDiskOnTheOutputDirectoryIsRefused) {
  const std::string ran = dir_ + "/ran";
  RunResult r = run_process(
      {bin_path("hvrun"), "-np", "1", "--health-check", "--health-disk-path", dir_ + "/checkpoints",
       "--health-min-free-disk", "1000000000000", "sh", "-c", "touch " + ran},
      {.timeout = std::chrono::milliseconds(60000)});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("host \\S+: only \\d+ MiB free on " + dir_ + ", below 1000000000000 MiB")))
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(ran));
  // The same job with what the disk has: it runs.
  RunResult ok = run_process(
      {bin_path("hvrun"), "-np", "1", "--health-check", "--health-disk-path", dir_ + "/checkpoints",
       "--health-min-free-disk", "1", "sh", "-c", "touch " + ran},
      {.timeout = std::chrono::milliseconds(60000)});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_TRUE(std::filesystem::exists(ran));
}

// An elastic job goes on without a failing host only when the others hold --min-np ranks: here
// none is left, so it does not start, naming the host, the reason and what was short.
TEST_F(HealthOneHostTest, AnElasticJobWithoutEnoughHealthyHostsDoesNotStart) {
  const std::string ran = dir_ + "/ran";
  RunResult r =
      run_process({bin_path("hvrun"), "-np", "2", "-H", "localhost:2", "--min-np", "1", "--max-np",
                   "3", "--health-min-free-disk", "1", "--health-check-script",
                   "echo 'PSU 1 failed'; exit 2", "sh", "-c", "touch " + ran},
                  {.timeout = std::chrono::milliseconds(60000)});
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("health check failed before any rank started: host localhost: PSU 1 failed "
                       "(--health-check-script exited with code 2); the other hosts have 0 slots, "
                       "fewer than --min-np 1"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(ran));
}

// An elastic job on this machine: the discovery script offers a second slot while the host's
// check fails. No rank starts for it and hvrun names the host and the reason; once the check
// passes again (after the cool-down) the slot gets its rank, which joins the training.
TEST_F(HealthOneHostTest, AnElasticSlotWaitsUntilItsHostPassesItsCheck) {
  const std::string hosts = dir_ + "/hosts", sick = dir_ + "/sick";
  write_text(hosts, "localhost:1\n");
  auto p = start_logged({bin_path("hvrun"),
                         "-np",
                         "1",
                         "--min-np",
                         "1",
                         "--max-np",
                         "2",
                         "--host-discovery-script",
                         "cat " + hosts,
                         "--blacklist-cooldown-range",
                         "2,2",
                         "--elastic-timeout",
                         "30",
                         "--health-check-script",
                         sick_while(sick, "GPU 0 reports uncorrected ECC errors"),
                         "--health-min-free-disk",
                         "1",
                         "-x",
                         "ELASTIC_STEPS=150",
                         "-x",
                         "ELASTIC_STEP_MS=100",
                         bin_path("hvrun_elastic_grow_job")},
                        dir_, "one-host");
  ASSERT_NE(wait_for_text(p->out_path, "MEMBER launched-as 0", seconds(30)).find("MEMBER"),
            std::string::npos)
      << read_file(p->err_path);
  write_text(sick, "");
  write_text(hosts, "localhost:2\n");
  const std::string refused = wait_for_text(
      p->err_path,
      "elastic: host localhost failed its health check: GPU 0 reports uncorrected ECC "
      "errors (--health-check-script exited with code 1); no rank is started there "
      "(1 failure, blacklisted for 2 s more)",
      seconds(20));
  ASSERT_NE(refused.find("failed its health check"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("rank(s) added"), std::string::npos) << refused;
  std::filesystem::remove(sick);
  std::optional<int> code = p->wait(seconds(60));
  const std::string out = read_file(p->out_path), err = read_file(p->err_path);
  ASSERT_TRUE(code.has_value()) << "hvrun still running after 60 s\n" << out << err;
  EXPECT_EQ(*code, 0) << out << err;
  EXPECT_NE(err.find("1 rank(s) added (localhost slot 1)"), std::string::npos) << err;
  EXPECT_TRUE(std::regex_search(out, std::regex("MEMBER launched-as 1 host \\S+ rank 1 size 2")))
      << out << err;
  EXPECT_NE(out.find("DONE size 2"), std::string::npos) << out << err;
}

// A network namespace of this test's own with a veth pair: the data interface (named by
// --network-interface) must be up and have a carrier. Needs root and `ip`.
class HealthLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace of its own)";
    if (ip_command().empty()) GTEST_SKIP() << "needs iproute2's ip";
    ns_ = "hvrun-health-" + std::to_string(::getpid());
    ASSERT_EQ(ip({"netns", "add", ns_}).exit_code, 0);
    made_ = true;
    ASSERT_EQ(
        ip({"-n", ns_, "link", "add", "hv0", "type", "veth", "peer", "name", "hv1"}).exit_code, 0);
    ASSERT_EQ(ip({"-n", ns_, "link", "set", "lo", "up"}).exit_code, 0);
  }
  void TearDown() override {
    if (made_) ip({"netns", "del", ns_});
  }
  static RunResult ip(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {ip_command()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, {.timeout = std::chrono::milliseconds(10000)});
  }
  RunResult job() const {
    return run_process(
        {ip_command(), "netns", "exec", ns_, bin_path("hvrun"), "-np", "1", "--health-check",
         "--health-min-free-disk", "1", "--network-interface", "hv0", "sh", "-c", "echo RAN"},
        {.timeout = std::chrono::milliseconds(60000)});
  }
  std::string ns_;
  bool made_ = false;
};

TEST_F(HealthLinkTest, ADataInterfaceThatIsDownIsRefused) {
  RunResult down = job();  // hv0 was never set up
  EXPECT_EQ(down.exit_code, 1) << down.out << down.err;
  EXPECT_NE(down.err.find(": data interface hv0 is down (administratively)"), std::string::npos)
      << down.err;
  EXPECT_EQ(down.out.find("RAN"), std::string::npos);

  ASSERT_EQ(ip({"-n", ns_, "link", "set", "hv0", "up"}).exit_code, 0);  // its peer stays down
  RunResult no_carrier = job();
  EXPECT_EQ(no_carrier.exit_code, 1) << no_carrier.out << no_carrier.err;
  EXPECT_NE(no_carrier.err.find(": data interface hv0 has no link (no carrier)"), std::string::npos)
      << no_carrier.err;

  ASSERT_EQ(ip({"-n", ns_, "link", "set", "hv1", "up"}).exit_code, 0);
  // The carrier comes up a moment after both ends are up.
  RunResult up;
  const auto until = std::chrono::steady_clock::now() + seconds(10);
  do {
    up = job();
  } while (up.exit_code != 0 && up.err.find("no carrier") != std::string::npos &&
           std::chrono::steady_clock::now() < until);
  EXPECT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_NE(up.out.find("RAN"), std::string::npos) << up.out << up.err;
}

// Two hosts (hvrun runs on hostA; -H and the discovery script name hostB:1 from the start); the
// health script fails on hostB itself while a file exists.
class ElasticHealthHostsTest : public NamespaceHostsTest<ElasticHealthHostsTest> {
 public:
  static constexpr const char* kScript = "netns-cluster";
  static constexpr const char* kWhat = "two-host harness";

 protected:
  void TearDown() override {
    for (pid_t pid : processes_running(bin_path("hvrun_elastic_grow_job"))) {
      const std::string ns = netns_of_pid(pid);
      if (ns == netns_of_name(env_["NS_A"]) || ns == netns_of_name(env_["NS_B"]))
        ::kill(pid, SIGKILL);
    }
  }
};

TEST_F(ElasticHealthHostsTest, AHostFailingItsCheckGetsNoRankUntilItPassesAfterItsCoolDown) {
  const std::string hosts = dir_ + "/health-hosts", sick = dir_ + "/hostB-sick";
  write_text(sick, "");
  write_text(hosts, "localhost:2\nhostB:1\n");
  auto p = start_logged({ip_command(),
                         "netns",
                         "exec",
                         env_["NS_A"],
                         bin_path("hvrun"),
                         "-p",
                         env_["SSH_PORT"],
                         "-i",
                         env_["KEY"],
                         "--rsh",
                         kNamespaceRsh,
                         "--start-timeout",
                         "30",
                         "--network-interface",
                         env_["IFACE_A"] + "," + env_["IFACE_B"],
                         "-np",
                         "3",
                         "-H",
                         "localhost:2,hostB:1",
                         "--min-np",
                         "2",
                         "--max-np",
                         "3",
                         "--host-discovery-script",
                         "cat " + hosts,
                         "--blacklist-cooldown-range",
                         "3,3",
                         "--elastic-timeout",
                         "30",
                         "--health-min-free-disk",
                         "1",
                         "--health-check-script",
                         sick_while(sick, "scratch disk is read-only", "hostB"),
                         "-x",
                         "ELASTIC_STEPS=120",
                         "-x",
                         "ELASTIC_STEP_MS=150",
                         bin_path("hvrun_elastic_grow_job")},
                        dir_, "health-hosts");
  // Checked at start (through ssh: its hostname, in hostB's own UTS namespace, made the script
  // fail), hostB is left out of the first membership; checked again when the discovery script
  // offers its slot, it fails again and is blacklisted.
  const std::string refused = wait_for_text(
      p->err_path, "elastic: host hostB failed its health check: scratch disk is read-only",
      seconds(40));
  EXPECT_NE(refused.find("hvrun: health check: host hostB is left out of the elastic job: scratch "
                         "disk is read-only (--health-check-script exited with code 1); it starts "
                         "on 2 ranks"),
            std::string::npos)
      << refused;
  ASSERT_NE(refused.find("host hostB failed its health check: scratch disk is read-only "
                         "(--health-check-script exited with code 1); no rank is started there"),
            std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("starting the agent of hostB"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("rank(s) added"), std::string::npos) << refused;
  EXPECT_EQ(hvrun_agent_in(env_["NS_B"]), -1) << "an agent runs on the unhealthy hostB";
  std::filesystem::remove(sick);
  std::optional<int> code = p->wait(seconds(90));
  const std::string out = read_file(p->out_path), err = read_file(p->err_path);
  ASSERT_TRUE(code.has_value()) << "hvrun still running after 90 s\n" << out << err;
  EXPECT_EQ(*code, 0) << out << err;
  EXPECT_NE(err.find("elastic: hostB joined"), std::string::npos) << err;
  EXPECT_TRUE(std::regex_search(out, std::regex("MEMBER launched-as 2 host hostB rank 2 size 3")))
      << out << err;
  EXPECT_NE(out.find("DONE size 3"), std::string::npos) << out << err;
}

}  // namespace
}  // namespace hvrun::test
