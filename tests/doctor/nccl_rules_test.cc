// NCCL's interface selection and configuration-file rules, as the doctor reproduces them.
#include <gtest/gtest.h>

#include "launcher/doctor/nccl_interfaces.h"
#include "launcher/doctor/nccl_settings.h"
#include "launcher/doctor/probe.h"
#include "tests/doctor/machines.h"

namespace hvrun::doctor {
namespace {

using test::iface;

std::vector<std::string> pick(const std::vector<NetInterface>& all,
                              std::optional<std::string> ifname = std::nullopt,
                              std::optional<std::string> comm_id = std::nullopt,
                              std::optional<std::string> family = std::nullopt) {
  return nccl_socket_interfaces(all, ifname, comm_id, family).names;
}

using Names = std::vector<std::string>;

TEST(NcclIfList, PrefixExactAndExclude) {
  EXPECT_TRUE(nccl_if_list_matches("eth10", "eth1"));     // prefixes
  EXPECT_FALSE(nccl_if_list_matches("eth10", "=eth1"));   // exact
  EXPECT_TRUE(nccl_if_list_matches("eth1", "=eth1"));
  EXPECT_FALSE(nccl_if_list_matches("docker0", "^docker,lo"));
  EXPECT_TRUE(nccl_if_list_matches("eth0", "^docker,lo"));
  EXPECT_TRUE(nccl_if_list_matches("eth10", "^=eth1"));   // exclude exactly eth1 only
  EXPECT_FALSE(nccl_if_list_matches("eth1", "^=eth1"));
  EXPECT_TRUE(nccl_if_list_matches("ib0", "eth,ib:1234"));  // a port after ':' is ignored
}

TEST(NcclInterfaces, UnsetPrefersInfinibandThenAnythingButDockerLoVirbr) {
  std::vector<NetInterface> all = {iface("lo", "127.0.0.1/8", true), iface("docker0", "172.17.0.1/16"),
                                   iface("eth0", "10.0.0.5/24"), iface("virbr0", "192.168.122.1/24"),
                                   iface("br-0f", "172.18.0.1/16")};
  EXPECT_EQ(pick(all), (Names{"eth0", "br-0f"}));  // NCCL does not exclude br-*
  all.push_back(iface("ib0", "192.168.100.5/24"));
  EXPECT_EQ(pick(all), (Names{"ib0"}));
}

TEST(NcclInterfaces, FallbackOrderIsDockerThenLoThenVirbr) {
  std::vector<NetInterface> all = {iface("virbr0", "192.168.122.1/24"), iface("lo", "127.0.0.1/8", true),
                                   iface("docker0", "172.17.0.1/16"), iface("eth0", "")};
  EXPECT_EQ(pick(all), (Names{"docker0"}));
  all.pop_back();
  all.pop_back();
  EXPECT_EQ(pick(all), (Names{"lo"}));
  all.pop_back();
  EXPECT_EQ(pick(all), (Names{"virbr0"}));
  EXPECT_TRUE(pick({}).empty());
}

TEST(NcclInterfaces, CommIdSubnetWinsOverTheGeneralRule) {
  std::vector<NetInterface> all = {iface("eth0", "10.0.0.5/24"), iface("eth1", "10.1.0.5/16")};
  EXPECT_EQ(pick(all, std::nullopt, std::string("10.1.200.7:5000")), (Names{"eth1"}));
  EXPECT_EQ(pick(all, std::nullopt, std::string("192.168.0.1:5000")), (Names{"eth0", "eth1"}));
}

TEST(NcclInterfaces, UserListAndItsQuirks) {
  std::vector<NetInterface> all = {iface("eth0", "10.0.0.5/24"), iface("eth10", "10.2.0.5/24"),
                                   iface("lo", "127.0.0.1/8", true)};
  EXPECT_EQ(pick(all, std::string("eth1")), (Names{"eth10"}));
  EXPECT_EQ(pick(all, std::string("=eth0")), (Names{"eth0"}));
  EXPECT_EQ(pick(all, std::string("^=eth0")), (Names{"eth10", "lo"}));
  EXPECT_TRUE(pick(all, std::string("ib")).empty());
  // One character is ignored: the automatic rule applies.
  auto p = nccl_socket_interfaces(all, std::string("e"), std::nullopt, std::nullopt);
  EXPECT_FALSE(p.user_list);
  EXPECT_EQ(p.names, (Names{"eth0", "eth10"}));
  EXPECT_NE(p.rule.find("one character"), std::string::npos);
}

TEST(NcclInterfaces, AddressFamiliesAndTheSixteenLimit) {
  std::vector<NetInterface> all = {iface("eth0", "fd00::2/64"), iface("eth1", "10.0.0.5/24"),
                                   iface("eth2", "")};
  EXPECT_EQ(pick(all), (Names{"eth0", "eth1"}));  // IPv6 counts, no address does not
  EXPECT_EQ(pick(all, std::nullopt, std::nullopt, std::string("AF_INET")), (Names{"eth1"}));
  std::vector<NetInterface> many;
  for (int i = 0; i < 20; ++i) many.push_back(iface("eth" + std::to_string(i), "10.0." + std::to_string(i) + ".1/24"));
  EXPECT_EQ(pick(many).size(), 16u);
}

TEST(NcclInterfaces, VirtualInterfaceReasons) {
  EXPECT_EQ(virtual_interface_reason(iface("lo", "127.0.0.1/8", true)), "loopback");
  EXPECT_EQ(virtual_interface_reason(iface("veth12ab", "")), "virtual Ethernet pair (containers)");
  NetInterface bridge = iface("lanbr", "10.0.0.1/24");
  bridge.bridge = true;
  EXPECT_EQ(virtual_interface_reason(bridge), "Linux bridge");
  EXPECT_EQ(virtual_interface_reason(iface("enp65s0f0", "10.0.0.1/24")), "");
}

TEST(NcclConf, ParsedAsNcclReadsIt) {
  auto entries = parse_nccl_conf("# comment\nNCCL_DEBUG=WARN\r\nnonsense\nNCCL_SOCKET_IFNAME==ens1f0\n=x\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0], (std::pair<std::string, std::string>{"NCCL_DEBUG", "WARN"}));
  EXPECT_EQ(entries[1], (std::pair<std::string, std::string>{"NCCL_SOCKET_IFNAME", "=ens1f0"}));
}

TEST(NcclConf, ConfFileReplacesTheUserFileAndEnvironmentWins) {
  std::map<std::string, std::string> env = {{"NCCL_CONF_FILE", "/opt/my.conf"}, {"NCCL_DEBUG", "INFO"}};
  auto files = nccl_config_files(env, "/home/u");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, "/opt/my.conf");
  EXPECT_EQ(files[1].path, "/home/u/.nccl.conf");
  EXPECT_FALSE(files[1].read_by_nccl);
  EXPECT_EQ(files[2].path, "/etc/nccl.conf");

  MachineDescription m;
  m.environment = env;
  m.config_files = files;
  for (auto& f : m.config_files) f.exists = true;
  m.config_files[0].entries = {{"NCCL_IB_DISABLE", "1"}, {"NCCL_DEBUG", "TRACE"}};
  m.config_files[1].entries = {{"NCCL_P2P_DISABLE", "1"}};  // not read: NCCL_CONF_FILE is set
  m.config_files[2].entries = {{"NCCL_IB_DISABLE", "0"}, {"NCCL_SOCKET_NTHREADS", "4"}};
  auto eff = effective_nccl_settings(m);
  EXPECT_EQ(eff["NCCL_DEBUG"].value, "INFO");
  EXPECT_EQ(eff["NCCL_DEBUG"].source, "environment");
  EXPECT_EQ(eff["NCCL_IB_DISABLE"].value, "1");
  EXPECT_EQ(eff["NCCL_IB_DISABLE"].source, "/opt/my.conf");
  EXPECT_EQ(eff["NCCL_SOCKET_NTHREADS"].source, "/etc/nccl.conf");
  EXPECT_EQ(eff.count("NCCL_P2P_DISABLE"), 0u);
  EXPECT_EQ(nccl_config_files({}, "/home/u")[0].path, "/home/u/.nccl.conf");
}

// A configuration space with an AER capability at 0x100 chaining to ACS at 0x150.
std::string config_space(unsigned acs_control) {
  std::string c(4096, '\0');
  auto put32 = [&c](unsigned off, unsigned v) {
    for (int i = 0; i < 4; ++i) c[off + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put32(0x100, 0x0001u | (1u << 16) | (0x150u << 20));  // AER, version 1, next 0x150
  put32(0x150, 0x000Du | (1u << 16));                   // ACS, last
  c[0x156] = static_cast<char>(acs_control & 0xff);
  c[0x157] = static_cast<char>(acs_control >> 8);
  return c;
}

TEST(PcieAcs, ReadsTheControlRegisterThroughTheCapabilityChain) {
  EXPECT_EQ(acs_redirects_p2p(config_space(0x001D)), true);   // SrcValid ReqRedir CmpltRedir UpstreamFwd
  EXPECT_EQ(acs_redirects_p2p(config_space(0x0011)), false);  // SrcValid UpstreamFwd only
  EXPECT_EQ(acs_redirects_p2p(std::string(64, '\0')), std::nullopt);  // not root: 64 bytes
  std::string no_caps(4096, '\0');
  EXPECT_EQ(acs_redirects_p2p(no_caps), false);
}

}  // namespace
}  // namespace hvrun::doctor
