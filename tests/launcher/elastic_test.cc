// The launcher's elastic pieces without processes: the membership policy (order, blacklist and
// cool-down, --min-np / --max-np), the discovery script's output and run, and the options.
#include <gtest/gtest.h>

#include "common/settings.h"
#include "launcher/elastic/elastic_options.h"
#include "launcher/elastic/host_discovery.h"
#include "launcher/elastic/membership.h"

namespace hvrun::launcher {
namespace {

using Clock = ElasticMembership::Clock;

ElasticOptions options(int np, int min_np, int max_np) {
  ElasticOptions o;
  o.enabled = true;
  o.start_np = np;
  o.min_np = min_np;
  o.max_np = max_np;
  return o;
}

TEST(ElasticMembership, SurvivorsKeepTheirOrderAndNewMembersGoLast) {
  ElasticMembership m(options(3, 2, 0));
  for (int i = 0; i < 3; ++i) m.add({i, {"a", i}});
  EXPECT_TRUE(m.remove_failed(1, Clock::now()));
  m.add({3, {"b", 0}});
  const std::vector<ElasticSlot> expected{{"a", 0}, {"a", 2}, {"b", 0}};
  EXPECT_EQ(m.plan(), expected);
  EXPECT_FALSE(m.remove_failed(1, Clock::now()));  // not a member any more
  EXPECT_FALSE(m.short_of_min());
  EXPECT_TRUE(m.remove_finished(0));
  EXPECT_TRUE(m.remove_failed(2, Clock::now()));
  EXPECT_TRUE(m.short_of_min());
}

TEST(ElasticMembership, UnlistedAreTheMembersOfHostsAndSlotsTheListNoLongerHas) {
  ElasticMembership m(options(5, 1, 0));
  m.add({0, {"a", 0}});
  m.add({1, {"a", 1}});
  m.add({2, {"b", 0}});
  m.add({3, {"c", 0}});
  m.add({4, {"c", 1}});
  // a keeps one slot, b is gone, c keeps both.
  EXPECT_EQ(m.unlisted({{"a", 1}, {"c", 2}}), (std::vector<int>{1, 2}));
  EXPECT_TRUE(m.unlisted({{"a", 2}, {"b", 1}, {"c", 2}}).empty());
  // A withdrawn member leaves without blacklisting its host.
  EXPECT_TRUE(m.remove_finished(2));
  EXPECT_FALSE(m.blacklisted("b", Clock::now()));
  EXPECT_EQ(m.free_slots({{"b", 1}}, Clock::now()), (std::vector<ElasticSlot>{{"b", 0}}));
}

TEST(ElasticMembership, AFailedHostGetsNoNewRankForEver) {
  ElasticMembership m(options(2, 1, 0));
  m.add({0, {"a", 0}});
  m.add({1, {"b", 0}});
  const auto now = Clock::now();
  m.remove_failed(1, now);
  EXPECT_TRUE(m.blacklisted("b", now + std::chrono::hours(100)));
  const std::vector<ElasticSlot> free = m.free_slots({{"a", 2}, {"b", 2}}, now);
  EXPECT_EQ(free, (std::vector<ElasticSlot>{{"a", 1}}));
  ASSERT_EQ(m.failed_hosts(now).size(), 1u);
  EXPECT_EQ(m.failed_hosts(now)[0], "b (1 failure, blacklisted for the rest of the job)");
}

TEST(ElasticMembership, TheCooldownIsDrawnFromItsRangeAndDoublesPerFailure) {
  ElasticOptions o = options(2, 1, 0);
  o.cooldown = CooldownRange{10, 20};
  ElasticMembership m(o, [] { return 0.5; });  // 15 s into the range
  m.add({0, {"a", 0}});
  m.add({1, {"a", 1}});
  const auto t0 = Clock::now();
  m.add({2, {"a", 2}});
  m.remove_failed(0, t0);
  EXPECT_TRUE(m.blacklisted("a", t0 + std::chrono::seconds(14)));
  EXPECT_FALSE(m.blacklisted("a", t0 + std::chrono::seconds(16)));
  m.remove_failed(1, t0);  // the same loss (one host, one moment): still one failure
  EXPECT_FALSE(m.blacklisted("a", t0 + std::chrono::seconds(16)));
  const auto t1 = t0 + std::chrono::seconds(1);
  m.remove_failed(2, t1);  // the second failure: twice as long
  EXPECT_TRUE(m.blacklisted("a", t1 + std::chrono::seconds(29)));
  EXPECT_FALSE(m.blacklisted("a", t1 + std::chrono::seconds(31)));
  EXPECT_EQ(m.failed_hosts(t1)[0].rfind("a (2 failures, ", 0), 0u);
}

TEST(ElasticMembership, FreeSlotsStopAtMaxNp) {
  ElasticMembership m(options(2, 2, 3));
  m.add({0, {"a", 0}});
  m.add({1, {"a", 1}});
  EXPECT_EQ(m.free_slots({{"a", 4}, {"b", 4}}, Clock::now()),
            (std::vector<ElasticSlot>{{"a", 2}}));
}

TEST(ElasticMembership, ResetsCountAgainstTheLimit) {
  ElasticOptions o = options(2, 1, 0);
  o.reset_limit = 2;
  ElasticMembership m(o);
  EXPECT_TRUE(m.count_reset());
  EXPECT_TRUE(m.count_reset());
  EXPECT_FALSE(m.count_reset());
}

TEST(HostDiscovery, ParsesHostSlotsLinesCommentsAndSlotsPerHost) {
  auto hosts = parse_discovered_hosts("# hosts\nnode1:4\n\n  node2  \nnode1:2 # fewer\n", 8);
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().to_string();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ((*hosts)[0].host, "node1");
  EXPECT_EQ((*hosts)[0].slots, 2);  // the last line for a host counts
  EXPECT_EQ((*hosts)[1].host, "node2");
  EXPECT_EQ((*hosts)[1].slots, 8);
}

TEST(HostDiscovery, RefusesLinesItCannotRead) {
  auto no_slots = parse_discovered_hosts("node1\n", 0);
  ASSERT_FALSE(no_slots.is_ok());
  EXPECT_NE(no_slots.status().message().find("--slots-per-host"), std::string::npos);
  EXPECT_FALSE(parse_discovered_hosts("node1:x\n", 0).is_ok());
  EXPECT_FALSE(parse_discovered_hosts(":4\n", 0).is_ok());
}

TEST(HostDiscovery, RunsTheScriptAndSaysHowItFailed) {
  auto out = run_discovery_script("echo node1:2; echo node2:3", std::chrono::seconds(5));
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(*out, "node1:2\nnode2:3\n");
  auto failed = run_discovery_script("exit 3", std::chrono::seconds(5));
  ASSERT_FALSE(failed.is_ok());
  EXPECT_NE(failed.status().message().find("exited with code 3"), std::string::npos)
      << failed.status().message();
  const auto start = std::chrono::steady_clock::now();
  auto slow = run_discovery_script("sleep 30", std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(slow.is_ok());
  EXPECT_NE(slow.status().message().find("did not finish"), std::string::npos);
}

TEST(ElasticOptionsTest, ElasticOnlyWithItsFlagsAndMinNpDefaultsToNp) {
  Settings plain;
  auto off = elastic_options(plain, 4);
  ASSERT_TRUE(off.is_ok());
  EXPECT_FALSE(off->enabled);
  Settings s;
  ASSERT_TRUE(s.apply_flag("--max-np", "8", true).is_ok());
  ASSERT_TRUE(s.apply_flag("--blacklist-cooldown-range", "5,50", true).is_ok());
  auto on = elastic_options(s, 4);
  ASSERT_TRUE(on.is_ok()) << on.status().to_string();
  EXPECT_TRUE(on->enabled);
  EXPECT_EQ(on->min_np, 4);
  EXPECT_EQ(on->max_np, 8);
  ASSERT_TRUE(on->cooldown.has_value());
  EXPECT_EQ(on->cooldown->max_seconds, 50);
  Settings bad;
  ASSERT_TRUE(bad.apply_flag("--min-np", "6", true).is_ok());
  auto refused = elastic_options(bad, 4);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("--min-np 6 is more than -np 4"), std::string::npos);
  EXPECT_FALSE(parse_cooldown_range("50,5").is_ok());
  EXPECT_TRUE(parse_cooldown_range("5 50").is_ok());
}

}  // namespace
}  // namespace hvrun::launcher
