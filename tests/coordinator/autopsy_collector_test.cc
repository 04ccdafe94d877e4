// The coordinator's autopsy collector (coordinator/service/autopsy_collector.h): done as soon as
// every rank answered, else at the deadline with the silent ranks unanswered; one at a time;
// answers to an older autopsy are dropped.
#include "coordinator/service/autopsy_collector.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

namespace hvrun::coordinator::service {
namespace {

using Clock = std::chrono::steady_clock;

struct Results {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::shared_ptr<const v1::AutopsyJobReport>> done;

  std::shared_ptr<const v1::AutopsyJobReport> wait_next(size_t index) {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return done.size() > index; });
    return done.size() > index ? done[index] : nullptr;
  }
};

v1::AutopsyJobReport job_of(int ranks) {
  v1::AutopsyJobReport report;
  report.set_trigger("test");
  for (int r = 0; r < ranks; ++r) report.add_ranks()->set_rank(r);
  return report;
}

v1::AutopsyReport answer(uint64_t id, int rank) {
  v1::AutopsyReport report;
  report.set_id(id);
  report.set_rank(rank);
  return report;
}

TEST(AutopsyCollector, DoneAsSoonAsEveryRankAnswered) {
  Results results;
  AutopsyCollector collector(std::chrono::seconds(30), [&](auto report) {
    std::lock_guard<std::mutex> lock(results.mutex);
    results.done.push_back(report);
    results.cv.notify_all();
  });
  const auto start = Clock::now();
  auto request = collector.begin(job_of(2));
  ASSERT_TRUE(request);
  EXPECT_EQ(request->deadline_ms(), 30000);
  EXPECT_FALSE(collector.begin(job_of(2))) << "one autopsy at a time";
  collector.on_report(1, answer(request->id(), 1));
  collector.on_report(0, answer(request->id(), 0));
  auto done = results.wait_next(0);
  ASSERT_TRUE(done);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(done->ranks(0).answered());
  EXPECT_TRUE(done->ranks(1).answered());
  EXPECT_EQ(done->ranks(1).report().rank(), 1);
  EXPECT_DOUBLE_EQ(done->deadline_seconds(), 30.0);
}

TEST(AutopsyCollector, AtTheDeadlineSilentRanksAreUnansweredAndOldAnswersDropped) {
  Results results;
  AutopsyCollector collector(std::chrono::milliseconds(200), [&](auto report) {
    std::lock_guard<std::mutex> lock(results.mutex);
    results.done.push_back(report);
    results.cv.notify_all();
  });
  auto first = collector.begin(job_of(2));
  ASSERT_TRUE(first);
  collector.on_report(0, answer(first->id(), 0));
  auto done = results.wait_next(0);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->ranks(0).answered());
  EXPECT_FALSE(done->ranks(1).answered());

  auto second = collector.begin(job_of(2));
  ASSERT_TRUE(second);
  EXPECT_GT(second->id(), first->id());
  collector.on_report(1, answer(first->id(), 1));  // late, for the first one
  done = results.wait_next(1);
  ASSERT_TRUE(done);
  EXPECT_FALSE(done->ranks(1).answered());
}

}  // namespace
}  // namespace hvrun::coordinator::service
