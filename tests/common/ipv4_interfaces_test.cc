#include "common/ipv4_interfaces.h"

#include <gtest/gtest.h>

namespace hvrun {
namespace {

TEST(Ipv4InterfacesTest, LoopbackIsListed) {
  bool loopback = false;
  for (const Ipv4Interface& iface : list_ipv4_interfaces())
    loopback |= iface.loopback && iface.address == "127.0.0.1";
  EXPECT_TRUE(loopback);
}

TEST(Ipv4InterfacesTest, TheFirstNamedInterfaceThisHostHasGivesTheAddress) {
  const std::vector<Ipv4Interface> host = {{"lo", "127.0.0.1", true}, {"ens5", "10.0.0.2", false}};
  EXPECT_EQ(*address_of_named_interface("GLOO_SOCKET_IFNAME", "eth1,ens5", host), "10.0.0.2");
  EXPECT_EQ(*address_of_named_interface("GLOO_SOCKET_IFNAME", "lo", host), "127.0.0.1");
  auto none = address_of_named_interface("HOROVOD_GLOO_IFACE", "ib0", host);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find(
                "HOROVOD_GLOO_IFACE=ib0 names no IPv4 interface of this host (it has lo "
                "127.0.0.1, ens5 10.0.0.2)"),
            std::string::npos)
      << none.status().message();
}

}  // namespace
}  // namespace hvrun
