// ElasticController without processes: what it does when a rank finishes its training while a
// worker of an added slot waits for a membership, how much of a discovery script's flood it
// looks at, which hosts its health checks let ranks start on, and where hot spares start and
// which one takes a lost rank's place. The runner side records what the controller asked for.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <set>

#include <boost/asio/io_context.hpp>

#include "launcher/elastic/elastic_controller.h"
#include "launcher/elastic/host_discovery.h"

namespace hvrun::launcher {
namespace {

constexpr int kExitedZero = 0;                 // a wait status: exited with code 0
constexpr int kKilledByTerm = SIGTERM;         // a wait status: killed by SIGTERM

struct FakeRunner {
  std::vector<WorkerRecord> records;
  std::vector<int> stopped;
  std::vector<std::string> said;
  std::vector<std::string> failed;
  std::vector<bool> spare;  // by record: started as a spare
  int membership_changes = 0;
  std::vector<ElasticSlot> last_plan;  // of the latest membership change
  int slot_additions = 0;
  std::vector<ElasticSlot> formed;

  ElasticRunnerSide side() {
    ElasticRunnerSide s;
    s.records = [this]() -> std::vector<WorkerRecord>& { return records; };
    s.ending = [] { return false; };
    s.say = [this](const std::string& t) { said.push_back(t); };
    s.fail = [this](const std::string& t) { failed.push_back(t); };
    s.start = [this](const ElasticSlot& slot, bool as_spare) {
      spare.push_back(as_spare);
      WorkerRecord r;
      r.rank = static_cast<int>(records.size());
      r.host = slot.host;
      r.pid = 1000 + r.rank;
      records.push_back(r);
      return r.rank;
    };
    s.stop = [this](int id) { stopped.push_back(id); };
    return s;
  }
  ElasticHooks hooks() {
    ElasticHooks h;
    h.change_membership = [this](const std::vector<ElasticSlot>& plan, const std::string&,
                                 const std::string&) {
      ++membership_changes;
      last_plan = plan;
    };
    h.add_slots = [this](const std::vector<ElasticSlot>&, int) { ++slot_additions; };
    h.formed = [this] { return formed; };
    return h;
  }
  void exit(int id, int wait_status) {
    records.at(static_cast<size_t>(id)).exited = true;
    records.at(static_cast<size_t>(id)).wait_status = wait_status;
  }
};

// Two ranks on host a; the script adds a slot on host b.
struct Grown {
  boost::asio::io_context io;
  FakeRunner runner;
  std::unique_ptr<ElasticController> controller;
  Grown() {
    controller = std::make_unique<ElasticController>(
        ElasticOptions{.enabled = true, .start_np = 2, .min_np = 1, .max_np = 3}, runner.hooks(),
        runner.side(), io);
    for (int i = 0; i < 2; ++i) {
      runner.side().start({"a", i}, false);
      controller->started(i, {"a", i});
    }
    runner.formed = {{"a", 0}, {"a", 1}};
    controller->on_discovered(std::vector<HostSlots>{{"a", 2}, {"b", 1}});
  }
};

TEST(ElasticController, AWorkerOfASlotNoMembershipTookInIsStoppedWhenTheTrainingEnds) {
  Grown g;
  ASSERT_EQ(g.runner.records.size(), 3u);
  EXPECT_EQ(g.runner.records[2].host, "b");
  EXPECT_EQ(g.runner.slot_additions, 1);
  g.runner.exit(1, kExitedZero);  // rank 1 finished its training before the next commit
  g.controller->exited(1);
  EXPECT_EQ(g.runner.stopped, std::vector<int>{2});
  // A slot offered now is not started.
  g.controller->on_discovered(std::vector<HostSlots>{{"a", 2}, {"b", 1}, {"c", 1}});
  EXPECT_EQ(g.runner.records.size(), 3u);
  // The stopped worker's end is no failure, and no membership follows it.
  g.runner.exit(2, kKilledByTerm);
  g.controller->exited(2);
  EXPECT_TRUE(g.controller->absorb());
  g.runner.exit(0, kExitedZero);
  g.controller->exited(0);
  EXPECT_TRUE(g.controller->absorb());
  EXPECT_EQ(g.runner.membership_changes, 0);
  EXPECT_TRUE(g.runner.failed.empty());
  EXPECT_EQ(g.controller->membership().size(), 0);
}

TEST(ElasticController, AWorkerThatJoinedAMembershipIsLeftToFinish) {
  Grown g;
  g.runner.formed = {{"a", 0}, {"a", 1}, {"b", 0}};  // the ranks reset with it
  g.runner.exit(0, kExitedZero);
  g.controller->exited(0);
  EXPECT_TRUE(g.runner.stopped.empty());
}

TEST(ElasticController, AFailureAfterTheTrainingEndedFailsTheJob) {
  Grown g;
  g.runner.formed = {{"a", 0}, {"a", 1}, {"b", 0}};
  g.runner.exit(0, kExitedZero);
  g.controller->exited(0);
  g.runner.exit(1, (1 << 8));  // exited with code 1
  EXPECT_FALSE(g.controller->absorb());
}

TEST(ElasticController, AFloodOfHostsBeyondMaxNpStartsNothing) {
  boost::asio::io_context io;
  FakeRunner runner;
  ElasticController controller(
      ElasticOptions{.enabled = true, .start_np = 2, .min_np = 1, .max_np = 2}, runner.hooks(),
      runner.side(), io);
  for (int i = 0; i < 2; ++i) {
    runner.side().start({"a", i}, false);
    controller.started(i, {"a", i});
  }
  std::string text = "a:2\n";
  for (int i = 0; i < 10000; ++i) text += "node" + std::to_string(i) + ":8\n";
  auto hosts = parse_discovered_hosts(text, 0);
  ASSERT_TRUE(hosts.is_ok());
  ASSERT_EQ(hosts->size(), 10001u);
  controller.on_discovered(*hosts);
  EXPECT_EQ(runner.records.size(), 2u);
  EXPECT_EQ(runner.slot_additions, 0);
  EXPECT_TRUE(controller.membership().free_slots(*hosts, ElasticMembership::Clock::now()).empty());
}

// With health checks, a discovered host gets ranks only once its check passed: not before, not
// while it is blacklisted for failing one (named with the reason), and again once its
// cool-down is over and a new check passes.
TEST(ElasticControllerHealth, AHostGetsRanksOnlyAfterItsCheckPassed) {
  boost::asio::io_context io;
  FakeRunner runner;
  std::vector<std::string> asked;   // hosts whose check the controller asked for
  std::set<std::string> cleared;    // hosts whose check passed (a clearance is used up)
  ElasticRunnerSide side = runner.side();
  side.host_cleared = [&](const std::string& host, int) {
    if (cleared.erase(host) > 0) return true;
    asked.push_back(host);
    return false;
  };
  ElasticController controller(
      ElasticOptions{.enabled = true, .start_np = 2, .min_np = 1, .max_np = 4,
                     .cooldown = CooldownRange{0.3, 0.3}},
      runner.hooks(), std::move(side), io);
  for (int i = 0; i < 2; ++i) {
    runner.side().start({"a", i}, false);
    controller.started(i, {"a", i});
  }
  const std::vector<HostSlots> hosts = {{"a", 2}, {"b", 2}};

  controller.on_discovered(hosts);
  EXPECT_EQ(asked, std::vector<std::string>{"b"});
  EXPECT_EQ(runner.records.size(), 2u) << "no rank on b before its check";
  EXPECT_EQ(runner.slot_additions, 0);

  controller.on_host_checked("b", false, "fan 2 stopped");
  ASSERT_FALSE(runner.said.empty());
  EXPECT_NE(runner.said.back().find("host b failed its health check: fan 2 stopped"),
            std::string::npos) << runner.said.back();
  EXPECT_NE(runner.said.back().find("1 failure, blacklisted for 1 s more"), std::string::npos)
      << runner.said.back();
  const auto failed = controller.membership().failed_hosts(ElasticMembership::Clock::now());
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].find("failed its health check: fan 2 stopped"), std::string::npos) << failed[0];
  controller.on_discovered(hosts);
  EXPECT_EQ(asked.size(), 1u) << "a blacklisted host is not even checked";
  EXPECT_EQ(runner.records.size(), 2u);

  // The cool-down (0.3 s, doubled per further failure: this is the first) runs out.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (controller.membership().blacklisted("b", ElasticMembership::Clock::now()) &&
         std::chrono::steady_clock::now() < until)
    ::usleep(20000);
  controller.on_discovered(hosts);
  EXPECT_EQ(asked, (std::vector<std::string>{"b", "b"})) << "checked again after the cool-down";
  EXPECT_EQ(runner.records.size(), 2u);
  cleared.insert("b");
  controller.on_host_checked("b", true, "");
  EXPECT_EQ(runner.records.size(), 4u) << "b's two slots start once its check passed";
  EXPECT_EQ(runner.slot_additions, 1);
  EXPECT_TRUE(cleared.empty());
}

// Four ranks on hosts a and b, two spares from the script's other slots (a2, c0).
struct WithSpares {
  boost::asio::io_context io;
  FakeRunner runner;
  std::unique_ptr<ElasticController> controller;
  WithSpares() {
    controller = std::make_unique<ElasticController>(
        ElasticOptions{.enabled = true, .start_np = 4, .min_np = 4, .max_np = 4,
                       .discovery_script = "./hosts.sh", .spares = 2},
        runner.hooks(), runner.side(), io);
    const ElasticSlot first[] = {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}};
    for (int i = 0; i < 4; ++i) {
      runner.side().start(first[i], false);
      controller->started(i, first[i]);
    }
    runner.formed = {first, first + 4};
    controller->on_discovered(std::vector<HostSlots>{{"a", 3}, {"b", 2}, {"c", 1}});
  }
};

// A spare's host is checked as a rank's is: the spare on a cleared host starts, the one on a
// host whose check has not passed waits for it.
TEST(ElasticControllerHealth, ASpareStartsOnlyOnAHostItsCheckCleared) {
  boost::asio::io_context io;
  FakeRunner runner;
  std::set<std::string> cleared{"a"};
  std::vector<std::string> asked;
  ElasticRunnerSide side = runner.side();
  side.host_cleared = [&](const std::string& host, int) {
    if (cleared.count(host) > 0) return true;
    asked.push_back(host);
    return false;
  };
  ElasticController controller(
      ElasticOptions{.enabled = true, .start_np = 2, .min_np = 2, .max_np = 2, .spares = 2},
      runner.hooks(), std::move(side), io);
  for (int i = 0; i < 2; ++i) {
    runner.side().start({"a", i}, false);
    controller.started(i, {"a", i});
  }
  controller.on_discovered(std::vector<HostSlots>{{"a", 3}, {"c", 1}});
  ASSERT_EQ(runner.records.size(), 3u) << "only a's spare starts";
  EXPECT_EQ(runner.records[2].host, "a");
  EXPECT_EQ(asked, std::vector<std::string>{"c"});
  cleared.insert("c");
  controller.on_host_checked("c", true, "");
  ASSERT_EQ(runner.records.size(), 4u) << "c's spare starts once its check passed";
  EXPECT_EQ(runner.records[3].host, "c");
  EXPECT_EQ(runner.spare, (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(controller.membership().size(), 2);
}

TEST(ElasticController, SparesStartOnSlotsBeyondTheRanksAndAreNoRanks) {
  WithSpares w;
  ASSERT_EQ(w.runner.records.size(), 6u);
  EXPECT_EQ(w.runner.spare, (std::vector<bool>{false, false, false, false, true, true}));
  EXPECT_EQ(w.runner.records[4].host, "a");
  EXPECT_EQ(w.runner.records[5].host, "c");
  // --max-np does not count them, and they reset nobody.
  EXPECT_EQ(w.controller->membership().size(), 4);
  EXPECT_EQ(w.controller->membership().spares().size(), 2u);
  EXPECT_EQ(w.runner.slot_additions, 0);
  EXPECT_EQ(w.runner.membership_changes, 0);
  // Offered again, the same slots start nothing more.
  w.controller->on_discovered(std::vector<HostSlots>{{"a", 3}, {"b", 2}, {"c", 1}});
  EXPECT_EQ(w.runner.records.size(), 6u);
}

TEST(ElasticController, ALostRanksPlaceGoesToASpareOnAnotherHostAndTheSpareIsReplaced) {
  WithSpares w;
  w.runner.records[1].lost = "killed with its host";  // rank a1
  ASSERT_TRUE(w.controller->absorb());
  EXPECT_EQ(w.runner.membership_changes, 1);
  // The world size stays: the survivors in order, then the spare from host c, not host a.
  const std::vector<ElasticSlot> expected{{"a", 0}, {"b", 0}, {"b", 1}, {"c", 0}};
  EXPECT_EQ(w.runner.last_plan, expected);
  EXPECT_EQ(w.controller->membership().spares().size(), 1u);
  EXPECT_NE(w.runner.said.back().find("spare(s) in the lost ranks' place: the worker started as "
                                      "rank 5 on host c; 4 ranks, 1 spare(s) left"),
            std::string::npos)
      << w.runner.said.back();
  // The next slot the script offers (host a is blacklisted) becomes a spare, not a rank.
  w.controller->on_discovered(std::vector<HostSlots>{{"a", 3}, {"b", 2}, {"c", 2}});
  ASSERT_EQ(w.runner.records.size(), 7u);
  EXPECT_TRUE(w.runner.spare[6]);
  EXPECT_EQ(w.runner.records[6].host, "c");
  EXPECT_EQ(w.controller->membership().spares().size(), 2u);
  EXPECT_EQ(w.runner.membership_changes, 1);
  EXPECT_EQ(w.runner.slot_additions, 0);
}

TEST(ElasticController, AHostLostWithItsSpareIsReplacedBySparesElsewhere) {
  WithSpares w;
  // Host a goes: its two ranks and its spare at once.
  for (int id : {0, 1, 4}) w.runner.records[static_cast<size_t>(id)].lost = "lost with host a";
  ASSERT_TRUE(w.controller->absorb());
  // One spare was left (on c): three ranks, short of --min-np 4, so the job waits for hosts.
  const std::vector<ElasticSlot> expected{{"b", 0}, {"b", 1}, {"c", 0}};
  EXPECT_EQ(w.controller->membership().plan(), expected);
  EXPECT_TRUE(w.controller->membership().spares().empty());
  EXPECT_TRUE(w.runner.failed.empty());
  // Short of --min-np, a slot the script offers becomes a rank, not a spare.
  w.controller->on_discovered(std::vector<HostSlots>{{"a", 3}, {"b", 3}, {"c", 1}});
  ASSERT_EQ(w.runner.records.size(), 7u);
  EXPECT_FALSE(w.runner.spare[6]);
  EXPECT_EQ(w.controller->membership().size(), 4);
  EXPECT_EQ(w.runner.membership_changes, 1);  // "slots were added", ending the wait
}

// Without a discovery script no slot can come: short of --min-np, the job fails at once rather
// than waiting --elastic-timeout for nothing.
TEST(ElasticController, ShortOfMinNpWithoutADiscoveryScriptFailsAtOnce) {
  boost::asio::io_context io;
  FakeRunner runner;
  ElasticController controller(ElasticOptions{.enabled = true, .start_np = 2, .min_np = 2},
                               runner.hooks(), runner.side(), io);
  for (int i = 0; i < 2; ++i) {
    runner.side().start({"a", i}, false);
    controller.started(i, {"a", i});
  }
  runner.exit(1, kKilledByTerm);
  EXPECT_TRUE(controller.absorb());
  ASSERT_EQ(runner.failed.size(), 1u);
  EXPECT_NE(runner.failed[0].find("elastic: 1 ranks, fewer than --min-np 2, and this job cannot "
                                  "add ranks (no --host-discovery-script offers slots); lost: "),
            std::string::npos)
      << runner.failed[0];
  EXPECT_EQ(runner.membership_changes, 0);
}

TEST(ElasticController, ASpareThatEndsChangesNoMembership) {
  WithSpares w;
  w.runner.exit(5, kKilledByTerm);
  ASSERT_TRUE(w.controller->absorb());
  EXPECT_EQ(w.runner.membership_changes, 0);
  EXPECT_EQ(w.controller->membership().size(), 4);
  EXPECT_EQ(w.controller->membership().spares().size(), 1u);
}

TEST(ElasticController, SparesAreStoppedWhenTheTrainingEnds) {
  WithSpares w;
  w.runner.exit(0, kExitedZero);
  w.controller->exited(0);
  EXPECT_EQ(w.runner.stopped, (std::vector<int>{4, 5}));
  w.runner.exit(4, kKilledByTerm);
  w.runner.exit(5, kKilledByTerm);
  EXPECT_TRUE(w.controller->absorb());
  EXPECT_TRUE(w.runner.failed.empty());
}

// Three ranks and one spare on host a, --replace-stragglers; the test says what the
// coordinator's straggler attribution reports.
struct WithAStraggler {
  boost::asio::io_context io;
  FakeRunner runner;
  std::optional<coordinator::telemetry::StragglerEvidence> evidence;
  std::unique_ptr<ElasticController> controller;
  explicit WithAStraggler(bool spare) {
    ElasticHooks hooks = runner.hooks();
    hooks.straggler = [this] { return evidence; };
    controller = std::make_unique<ElasticController>(
        ElasticOptions{.enabled = true, .start_np = 3, .min_np = 3, .spares = 1,
                       .replace_stragglers = true},
        hooks, runner.side(), io);
    for (int i = 0; i < 3; ++i) {
      runner.side().start({"a", i}, false);
      controller->started(i, {"a", i});
    }
    if (spare) controller->top_up_spares({{"a", 4}});
  }
};

coordinator::telemetry::StragglerEvidence rank_one_late() {
  return {.rank = 1, .host = "a", .late_steps = 18, .window = 20, .threshold_seconds = 0.05,
          .lateness_median_seconds = 0.035};
}

TEST(ElasticControllerStragglers, AStragglerIsStoppedAndASpareTakesItsPlaceItsHostKept) {
  WithAStraggler w(/*spare=*/true);
  w.controller->check_stragglers();
  EXPECT_TRUE(w.runner.stopped.empty()) << "nobody reported";
  w.evidence = rank_one_late();
  w.controller->check_stragglers();
  ASSERT_EQ(w.runner.stopped, (std::vector<int>{1}));
  EXPECT_NE(w.runner.said.back().find("rank 1 on host a (the worker started as rank 1, pid 1001) "
                                      "was last by 50.0 ms or more in 18 of the last 20 steps, "
                                      "35.0 ms late at the median (--replace-stragglers): "
                                      "stopping it"),
            std::string::npos)
      << w.runner.said.back();
  // Reported again before its exit came: stopped once.
  w.controller->check_stragglers();
  EXPECT_EQ(w.runner.stopped.size(), 1u);
  w.runner.exit(1, kKilledByTerm);
  ASSERT_TRUE(w.controller->absorb());
  const std::vector<ElasticSlot> expected{{"a", 0}, {"a", 2}, {"a", 3}};
  EXPECT_EQ(w.runner.last_plan, expected);
  EXPECT_NE(w.runner.said.back().find("the worker started as rank 1 on host a was stopped as a "
                                      "straggler; spare(s) in the lost ranks' place: the worker "
                                      "started as rank 3 on host a; 3 ranks, 0 spare(s) left"),
            std::string::npos)
      << w.runner.said.back();
  EXPECT_TRUE(w.controller->membership().failed_hosts(ElasticMembership::Clock::now()).empty());
  // The evidence still names the old membership's rank 1 until the coordinator opens the next:
  // nothing more is stopped, until the coordinator reported none in between.
  w.controller->check_stragglers();
  EXPECT_EQ(w.runner.stopped.size(), 1u);
  EXPECT_TRUE(w.runner.failed.empty());
}

TEST(ElasticControllerStragglers, WithoutASpareTheStragglerIsNamedOnceAndLeftRunning) {
  WithAStraggler w(/*spare=*/false);
  w.evidence = rank_one_late();
  w.controller->check_stragglers();
  w.controller->check_stragglers();
  EXPECT_TRUE(w.runner.stopped.empty());
  int named = 0;
  for (const std::string& line : w.runner.said)
    named += line.find("no spare is ready, so it is not replaced") != std::string::npos;
  EXPECT_EQ(named, 1);
  EXPECT_EQ(w.runner.membership_changes, 0);
}

// The script runs every second: reading 40,000 names must cost next to nothing (a scan of the
// hosts read so far for each line took about 2 s here).
TEST(ElasticDiscovery, ReadingAFloodOfHostsIsCheap) {
  std::string text;
  for (int i = 0; i < 40000; ++i) text += "node" + std::to_string(i) + ":8\n";
  text += "node7:2\n";  // named twice: the last line counts
  const auto started = std::chrono::steady_clock::now();
  auto hosts = parse_discovered_hosts(text, 0);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(hosts.is_ok());
  ASSERT_EQ(hosts->size(), 40000u);
  EXPECT_EQ((*hosts)[7].slots, 2);
  EXPECT_LT(took, 0.5);
}

}  // namespace
}  // namespace hvrun::launcher
