// Unit tests of the multi-host pieces that need no second host: the agent protocol's framing,
// interface ranking and choice, environment forwarding and -x, the remote shell's command line
// and its error messages.
#include <gtest/gtest.h>

#include "launcher/remote/agent_protocol.h"
#include "launcher/plan/env_forwarding.h"
#include "launcher/plan/network_choice.h"
#include "launcher/plan/network_interfaces.h"
#include "launcher/options/options.h"
#include "launcher/remote/reach_probe.h"
#include "launcher/remote/remote_shell.h"

namespace hvrun::launcher {
namespace {

NetInterface iface(const std::string& name, const std::string& address, int port = 1000) {
  NetInterface i;
  i.name = name;
  i.address = address;
  i.probe_port = port;
  i.loopback = name == "lo";
  return i;
}

TEST(AgentProtocolTest, FramesSurviveArbitrarySplitsAndBinaryPayloads) {
  std::string payload("a\nb\0c OUT 3\n", 12);
  std::string bytes = encode_frame("OUT", {"3", "1"}, payload) + encode_frame("BYE");
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    FrameReader reader;
    std::vector<Frame> got;
    for (const std::string& piece : {bytes.substr(0, cut), bytes.substr(cut)}) {
      reader.feed(piece);
      while (true) {
        auto f = reader.next();
        ASSERT_TRUE(f.is_ok());
        if (!f->has_value()) break;
        got.push_back(**f);
      }
    }
    ASSERT_EQ(got.size(), 2u) << "cut at " << cut;
    EXPECT_EQ(got[0].type, "OUT");
    EXPECT_EQ(got[0].int_arg(0), 3);
    EXPECT_EQ(got[0].int_arg(1), 1);
    EXPECT_EQ(got[0].payload, payload);
    EXPECT_EQ(got[1].type, "BYE");
    EXPECT_TRUE(got[1].payload.empty());
  }
  EXPECT_EQ(split_list(join_list({"A=1", "", "B=x y"})),
            (std::vector<std::string>{"A=1", "", "B=x y"}));
}

TEST(AgentProtocolTest, GarbageIsAnErrorNotAHang) {
  FrameReader reader;
  reader.feed("Welcome to our cluster!\n");
  EXPECT_FALSE(reader.next().is_ok());
  FrameReader endless;
  endless.feed(std::string(FrameReader::kMaxHeader + 1, 'x'));
  EXPECT_FALSE(endless.next().is_ok());
}

TEST(InterfaceRankingTest, LoopbackDockerAndBridgesAreNeverCandidates) {
  NetInterface bridge = iface("lan-br", "10.1.0.1");
  bridge.bridge = true;
  std::vector<std::string> excluded;
  auto ranked = rank_candidates(
      {iface("lo", "127.0.0.1"), iface("docker0", "172.17.0.1"), iface("br-1a2b", "172.18.0.1"),
       iface("virbr0", "192.168.122.1"), bridge, iface("wg0", "10.9.0.1"),
       iface("enp3s0", "10.0.0.5"), iface("eth1", "10.0.1.5")},
      &excluded);
  ASSERT_EQ(ranked.size(), 3u);
  EXPECT_EQ(ranked[0].name, "enp3s0");  // NIC-style names first, kernel order among them
  EXPECT_EQ(ranked[1].name, "eth1");
  EXPECT_EQ(ranked[2].name, "wg0");
  ASSERT_EQ(excluded.size(), 5u);
  EXPECT_NE(excluded[0].find("lo (127.0.0.1): loopback"), std::string::npos) << excluded[0];
  EXPECT_NE(excluded[1].find("docker interface"), std::string::npos) << excluded[1];
  EXPECT_NE(excluded[4].find("lan-br (10.1.0.1): virtual bridge"), std::string::npos);
}

TEST(InterfaceChoiceTest, OnlyAnInterfaceEveryPeerReachedIsChosen) {
  HostInterfaces b{"hostB",
                   {iface("eth0", "10.232.2.1", 41), iface("eth1", "10.231.0.2", 42),
                    iface("lo", "127.0.0.1", 43)}};
  std::vector<ProbeOutcome> probes = {
      {"hostA", "10.232.2.1:41", false, "Network is unreachable"},
      {"hostA", "10.231.0.2:42", true, ""},
      {"hostC", "10.232.2.1:41", true, ""},  // one peer reaching it is not enough
      {"hostC", "10.231.0.2:42", true, ""},
  };
  auto choice = choose_interface(b, {"hostA", "hostC"}, probes, {});
  ASSERT_TRUE(choice.is_ok()) << choice.status().message();
  EXPECT_EQ(choice->interface, "eth1");
  EXPECT_EQ(choice->address, "10.231.0.2");
  std::string reasons;
  for (const auto& r : choice->reasons) reasons += r + "\n";
  EXPECT_NE(reasons.find("eth0 (10.232.2.1): not reached from hostA (Network is unreachable)"),
            std::string::npos)
      << reasons;
  EXPECT_NE(reasons.find("eth1 (10.231.0.2): chosen"), std::string::npos) << reasons;

  probes[1].reached = false;
  probes[1].error = "no answer within 2000 ms";
  auto none = choose_interface(b, {"hostA", "hostC"}, probes, {});
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("hostB: no interface is reachable"), std::string::npos);
  EXPECT_NE(none.status().message().find("--network-interface"), std::string::npos);
}

TEST(InterfaceChoiceTest, NetworkInterfaceFlagSkipsTheProbe) {
  HostInterfaces a{"hostA", {iface("eth0", "10.0.0.1"), iface("ib0", "192.168.0.1")}};
  auto choice = choose_interface(a, {"hostB"}, {}, split_names("ens9,ib0"));
  ASSERT_TRUE(choice.is_ok());
  EXPECT_EQ(choice->interface, "ib0");
  auto missing = choose_interface(a, {"hostB"}, {}, {"ens9"});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("it has: eth0 ib0"), std::string::npos)
      << missing.status().message();
}

TEST(InterfaceChoiceTest, NcclAndGlooVariablesNameTheChosenInterfaceUserValuesWin) {
  InterfaceChoice c{"hostA", "eth1", "10.231.0.1", {}};
  std::vector<std::string> reasons;
  auto env = host_network_environment(c, "ethernet", {}, &reasons);
  EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "=eth1");
  EXPECT_EQ(env["GLOO_SOCKET_IFNAME"], "eth1");
  EXPECT_EQ(env["NCCL_IB_DISABLE"], "1");
  auto user = host_network_environment(c, "auto", {{"NCCL_SOCKET_IFNAME", "ib"}}, &reasons);
  EXPECT_EQ(user.count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(user.count("NCCL_IB_DISABLE"), 0u);
  bool shown = false;
  for (const auto& r : reasons)
    shown |= r == "NCCL_SOCKET_IFNAME=ib (set by you, passed on unchanged)";
  EXPECT_TRUE(shown);
}

TEST(ReachProbeTest, AListenerIsReachedAClosedPortIsNot) {
  std::vector<NetInterface> local = {iface("lo", "127.0.0.1", 0)};
  std::vector<int> fds = open_probe_listeners(local);
  ASSERT_EQ(fds.size(), 1u);
  ASSERT_GT(local[0].probe_port, 0);
  std::string open_target = "127.0.0.1:" + std::to_string(local[0].probe_port);
  close_listeners(fds);
  std::vector<NetInterface> again = {iface("lo", "127.0.0.1", 0)};
  fds = open_probe_listeners(again);
  auto results = probe_targets(
      {"127.0.0.1:" + std::to_string(again[0].probe_port), open_target, "not-an-address"},
      std::chrono::milliseconds(2000));
  close_listeners(fds);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].reached) << results[0].error;
  EXPECT_FALSE(results[1].reached);  // closed again: refused
  EXPECT_FALSE(results[1].error.empty());
  EXPECT_FALSE(results[2].reached);
}

TEST(EnvForwardingTest, TheLaunchSessionStaysBehindAndMinusXAddsOrForces) {
  Environment launch = {
      {"PATH", "/usr/bin"},        {"HOSTNAME", "login1"}, {"SSH_CLIENT", "x"},
      {"SSH_AUTH_SOCK", "/tmp/a"}, {"DISPLAY", ":0"},      {"HOME", "/home/u"},
      {"OMP_NUM_THREADS", "4"},    {"NCCL_DEBUG", "INFO"}, {"BASH_FUNC_f%%", "()"}};
  std::vector<ExportSpec> exports = {
      {"HOME", std::nullopt}, {"EXTRA", "1=2"}, {"UNSET_HERE", std::nullopt}};
  std::vector<std::string> notes;
  Environment env = forwarded_environment(launch, exports, &notes);
  EXPECT_EQ(env["PATH"], "/usr/bin");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "4");
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
  for (const char* gone : {"HOSTNAME", "SSH_CLIENT", "SSH_AUTH_SOCK", "DISPLAY", "BASH_FUNC_f%%"})
    EXPECT_EQ(env.count(gone), 0u) << gone;
  EXPECT_EQ(env["HOME"], "/home/u");  // -x HOME forwards it past the ignore list
  EXPECT_EQ(env["EXTRA"], "1=2");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("UNSET_HERE"), std::string::npos);
  EXPECT_TRUE(ignored_for_remote("SSH_CONNECTION"));
  EXPECT_FALSE(ignored_for_remote("HOSTNAMES"));  // exact names match exactly
}

TEST(EnvForwardingTest, MinusXParsing) {
  auto plain = parse_export("FOO");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->name, "FOO");
  EXPECT_FALSE(plain->value.has_value());
  auto valued = parse_export("FOO_2=a=b");
  ASSERT_TRUE(valued.is_ok());
  EXPECT_EQ(*valued->value, "a=b");
  auto empty = parse_export("E=");
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(*empty->value, "");
  for (const char* bad : {"", "=1", "1ABC", "A-B=1", "A B"})
    EXPECT_FALSE(parse_export(bad).is_ok()) << bad;

  auto opts = parse_command_line(
      {"-x", "A=1", "-x", "B", "-p", "2222", "-i", "/k", "--rsh", "ssh -F cfg", "prog"},
      [](const char*) -> const char* { return nullptr; });
  ASSERT_TRUE(opts.is_ok()) << opts.status().message();
  ASSERT_EQ(opts->exports.size(), 2u);
  EXPECT_EQ(opts->exports[0].name, "A");
  EXPECT_EQ(opts->exports[1].name, "B");
  RemoteShellOptions rsh = RemoteShellOptions::from_settings(opts->settings, false);
  EXPECT_EQ(rsh.port, 2222);
  EXPECT_EQ(rsh.identity_file, "/k");
  auto bad = parse_command_line({"-x", "no good", "prog"},
                                [](const char*) -> const char* { return nullptr; });
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("-x 'no good'"), std::string::npos);
}

TEST(RemoteShellTest, CommandLineCarriesOptionsButNeverTheSecret) {
  RemoteShellOptions o;
  o.port = 2222;
  o.identity_file = "/keys/id";
  o.connect_timeout_s = 7.5;
  auto argv = remote_agent_command(o, "node2", "/opt/hv run/hvrun");
  std::vector<std::string> expected = {
      "ssh",  "-o", "BatchMode=yes", "-o",    "ConnectTimeout=8",         "-p",
      "2222", "-i", "/keys/id",      "node2", "'/opt/hv run/hvrun' agent"};
  EXPECT_EQ(argv, expected);
  o.rsh = "/usr/bin/rsh -l me";
  o.port = 0;
  o.identity_file.clear();
  EXPECT_EQ(remote_agent_command(o, "n", "/h"),
            (std::vector<std::string>{"/usr/bin/rsh", "-l", "me", "n", "'/h' agent"}));
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

// `hvrun health-check ARGS` through the remote shell: every argument reaches hvrun there as one
// word (the remote user's shell splits the command line), an empty one too.
TEST(RemoteShellTest, HvrunSubcommandArgumentsAreQuotedForTheRemoteShell) {
  RemoteShellOptions o;
  o.rsh = "/usr/bin/rsh";
  EXPECT_EQ(remote_hvrun_command(o, "n", "/h", {"health-check", "--script", "echo it's sick; exit 1",
                                                "--disk-path", ""}),
            (std::vector<std::string>{
                "/usr/bin/rsh", "n",
                "'/h' health-check --script 'echo it'\\''s sick; exit 1' --disk-path ''"}));
  o.srun = true;  // srun passes its words as they are
  const auto srun = remote_hvrun_command(o, "n", "/h", {"health-check", "--script", "a b"});
  EXPECT_EQ(std::vector<std::string>(srun.end() - 4, srun.end()),
            (std::vector<std::string>{"/h", "health-check", "--script", "a b"}));
}

TEST(RemoteShellTest, FailuresNameTheHostAndCarrySshsWords) {
  std::string refused = describe_remote_failure(
      "node2", "ssh", 255, "ssh: connect to host node2 port 22: Connection refused\r\n",
      "/opt/hvrun");
  EXPECT_NE(refused.find(
                "host node2: ssh failed: ssh: connect to host node2 port 22: Connection refused"),
            std::string::npos)
      << refused;
  std::string denied = describe_remote_failure(
      "node3", "ssh", 255, "root@node3: Permission denied (publickey).\n", "/opt/hvrun");
  EXPECT_NE(denied.find("host node3: ssh failed: root@node3: Permission denied (publickey)."),
            std::string::npos)
      << denied;
  std::string missing = describe_remote_failure(
      "node4", "ssh", 127, "bash: line 1: /opt/hvrun: No such file or directory\n", "/opt/hvrun");
  EXPECT_NE(missing.find("host node4: hvrun is not installed at /opt/hvrun there"),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("No such file or directory"), std::string::npos);
}

}  // namespace
}  // namespace hvrun::launcher
