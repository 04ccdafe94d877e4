// OneShotTimer (worker_lib/runtime/one_shot_timer.h): the batch timer of asynchronous
// submissions. It fires once at its deadline, not when disarmed first, and a later deadline
// replaces an earlier one.
#include "worker_lib/runtime/one_shot_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace hvrun::detail {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Polls `fired` until it reaches `count` or `limit` passes.
bool reaches(const std::atomic<int>& fired, int count, milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (fired.load() < count && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
  return fired.load() >= count;
}

TEST(OneShotTimer, FiresOnceAtItsDeadline) {
  std::atomic<int> fired{0};
  Clock::time_point when{};
  OneShotTimer timer([&] {
    when = Clock::now();
    ++fired;
  });
  ASSERT_TRUE(timer.start("test-timer").is_ok());
  const auto armed = Clock::now();
  timer.arm(armed + milliseconds(20));
  ASSERT_TRUE(reaches(fired, 1, milliseconds(5000)));
  EXPECT_GE(when - armed, milliseconds(19));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(fired.load(), 1);  // one shot
}

TEST(OneShotTimer, DisarmedItDoesNotFire) {
  std::atomic<int> fired{0};
  OneShotTimer timer([&] { ++fired; });
  ASSERT_TRUE(timer.start("test-timer").is_ok());
  timer.arm(Clock::now() + milliseconds(30));
  timer.disarm();
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(fired.load(), 0);
  // Armed again after a disarm, it fires.
  timer.arm(Clock::now() + milliseconds(5));
  EXPECT_TRUE(reaches(fired, 1, milliseconds(5000)));
}

TEST(OneShotTimer, ALaterDeadlineReplacesTheEarlierOne) {
  std::atomic<int> fired{0};
  OneShotTimer timer([&] { ++fired; });
  ASSERT_TRUE(timer.start("test-timer").is_ok());
  timer.arm(Clock::now() + milliseconds(20));
  timer.arm(Clock::now() + milliseconds(400));
  std::this_thread::sleep_for(milliseconds(150));
  EXPECT_EQ(fired.load(), 0);
  EXPECT_TRUE(reaches(fired, 1, milliseconds(5000)));
}

TEST(OneShotTimer, StopEndsItsThreadWithADeadlinePending) {
  std::atomic<int> fired{0};
  {
    OneShotTimer timer([&] { ++fired; });
    ASSERT_TRUE(timer.start("test-timer").is_ok());
    timer.arm(Clock::now() + std::chrono::hours(1));
    timer.stop();
    timer.stop();  // idempotent; the destructor stops it a third time
  }
  EXPECT_EQ(fired.load(), 0);
  OneShotTimer never_started([&] { ++fired; });
  never_started.arm(Clock::now());  // before start(): nothing to arm, nothing fires
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
}  // namespace hvrun::detail
