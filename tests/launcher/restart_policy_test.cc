// hvrun --max-restarts: when a failed job is started again, and when it is not.
#include <gtest/gtest.h>

#include <csignal>

#include "launcher/cli/restart_policy.h"

namespace hvrun::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

AttemptOutcome failed(int rank, int code, milliseconds ran_for, int sig = 0) {
  AttemptOutcome o;
  o.exit_code = code;
  o.end.kind = JobEndKind::kWorkerFailed;
  o.end.rank = rank;
  o.end.exit_code = code;
  o.end.signal = sig;
  o.end.message = "rank " + std::to_string(rank) + " failed";
  o.ran_for = ran_for;
  return o;
}

AttemptOutcome succeeded() { return AttemptOutcome{}; }

TEST(RestartPolicy, ZeroRestartsKeepsTodaysBehaviour) {
  RestartPolicy policy(0);
  auto d = policy.after_attempt(failed(1, 3, seconds(30)));
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message, "");
  EXPECT_EQ(policy.restarts_done(), 0);
}

TEST(RestartPolicy, RestartsUntilTheLimitThenNamesTheLastCause) {
  RestartPolicy policy(2);
  auto d1 = policy.after_attempt(failed(1, 137, seconds(30), SIGKILL));
  EXPECT_TRUE(d1.restart);
  EXPECT_NE(d1.message.find("restart 1 of 2"), std::string::npos) << d1.message;
  EXPECT_NE(d1.message.find("rank 1 failed"), std::string::npos) << d1.message;
  auto d2 = policy.after_attempt(failed(0, 1, seconds(40)));
  EXPECT_TRUE(d2.restart);
  auto d3 = policy.after_attempt(failed(1, 2, seconds(50)));
  EXPECT_FALSE(d3.restart);
  EXPECT_NE(d3.message.find("all 2 restart(s)"), std::string::npos) << d3.message;
  EXPECT_NE(d3.message.find("rank 1 failed"), std::string::npos) << d3.message;
  EXPECT_EQ(policy.restarts_done(), 2);
  ASSERT_EQ(policy.restart_log().size(), 2u);
}

TEST(RestartPolicy, ASuccessAfterARestartEndsTheLoop) {
  RestartPolicy policy(3);
  EXPECT_TRUE(policy.after_attempt(failed(1, 137, seconds(5), SIGKILL)).restart);
  auto d = policy.after_attempt(succeeded());
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.message, "");
  EXPECT_EQ(policy.restarts_done(), 1);
}

TEST(RestartPolicy, TheSameQuickFailureTwiceStopsEarly) {
  RestartPolicy policy(5, seconds(10));
  EXPECT_TRUE(policy.after_attempt(failed(0, 2, milliseconds(300))).restart);
  auto d = policy.after_attempt(failed(0, 2, milliseconds(250)));
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.message.find("same way twice"), std::string::npos) << d.message;
  EXPECT_EQ(policy.restarts_done(), 1);
}

TEST(RestartPolicy, SlowOrDifferentFailuresKeepRestarting) {
  RestartPolicy policy(5, seconds(10));
  EXPECT_TRUE(policy.after_attempt(failed(0, 2, milliseconds(300))).restart);
  EXPECT_TRUE(policy.after_attempt(failed(1, 2, milliseconds(300))).restart);   // another rank
  EXPECT_TRUE(policy.after_attempt(failed(1, 2, seconds(60))).restart);         // ran a while
}

// Rank 1's failure told once by its own exit and once by the coordinator naming it (whichever
// hvrun saw first) is the same failure: the second quick one ends the restarts.
TEST(RestartPolicy, TheSameCauseToldByTheCoordinatorIsTheSameFailure) {
  RestartPolicy policy(5, seconds(10));
  EXPECT_TRUE(policy.after_attempt(failed(1, 1, milliseconds(300))).restart);
  AttemptOutcome named = failed(1, 1, milliseconds(300));
  named.end.kind = JobEndKind::kControlPlane;
  named.end.message = "job aborted: rank 1 failed: boom";
  auto d = policy.after_attempt(named);
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.message.find("same way twice"), std::string::npos) << d.message;
  // A control-plane failure naming no rank is not a rank's failure.
  RestartPolicy other(5, seconds(10));
  AttemptOutcome anonymous = named;
  anonymous.end.rank = -1;
  EXPECT_TRUE(other.after_attempt(failed(1, 1, milliseconds(300))).restart);
  EXPECT_TRUE(other.after_attempt(anonymous).restart);
}

TEST(RestartPolicy, HvrunStoppedBySignalIsNotRestarted) {
  RestartPolicy policy(3);
  AttemptOutcome o = failed(-1, 130, seconds(20));
  o.end.kind = JobEndKind::kSignal;
  o.end.signal = SIGINT;
  auto d = policy.after_attempt(o);
  EXPECT_FALSE(d.restart);
  EXPECT_NE(d.message.find("SIGINT"), std::string::npos) << d.message;
}

}  // namespace
}  // namespace hvrun::launcher
