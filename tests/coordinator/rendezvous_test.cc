// Rendezvous::register_async: answered when the last rank arrives, at the start timeout by the
// rendezvous's own thread, at an abort, or with CANCELLED when the rendezvous goes; alongside
// blocking registrations of the same rendezvous.
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/rendezvous/rendezvous.h"

namespace hvrun::coordinator {
namespace {

using namespace std::chrono_literals;

v1::WorkerInfo worker_with_rank(int rank) {
  v1::WorkerInfo w;
  w.set_host("h" + std::to_string(rank / 2));
  w.set_requested_rank(rank);
  w.set_pid(1000 + rank);
  return w;
}

// The answers of asynchronous registrations, as they arrive.
struct Answers {
  std::mutex mutex;
  std::vector<Result<Registered>> got;
  Rendezvous::Done done() {
    return [this](Result<Registered> r) {
      std::lock_guard<std::mutex> lock(mutex);
      got.push_back(std::move(r));
    };
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return got.size();
  }
};

TEST(Rendezvous, AsynchronousRegistrationsAreAnsweredWhenTheLastRankArrives) {
  std::atomic<int> ended{0};
  Rendezvous rendezvous(4, {}, 10s, [&](const Status& s) { ended += s.is_ok() ? 1 : 100; });
  Answers answers;
  for (int r : {3, 1, 0}) rendezvous.register_async(worker_with_rank(r), answers.done());
  EXPECT_EQ(answers.size(), 0u);
  // A blocking registration of the same rendezvous completes it, and every one is answered.
  Result<Registered> last = rendezvous.register_worker(worker_with_rank(2));
  ASSERT_TRUE(last.is_ok()) << last.status().to_string();
  EXPECT_EQ(last->topology.rank(), 2);
  EXPECT_EQ(ended.load(), 1);
  ASSERT_EQ(answers.size(), 3u);
  std::vector<int> ranks;
  for (const auto& a : answers.got) {
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ranks.push_back(a->topology.rank());
    EXPECT_EQ(a->topology.size(), 4);
    EXPECT_EQ(a->topology.local_size(), 2);
    ASSERT_TRUE(a->placement);
    v1::HostPlacement placement;
    ASSERT_TRUE(placement.ParseFromString(*a->placement));
    EXPECT_EQ(placement.hosts_size(), 2);
  }
  EXPECT_EQ(ranks, (std::vector<int>{3, 1, 0}));
  // Afterwards: refused at once, without a thread of its own.
  rendezvous.register_async(worker_with_rank(1), answers.done());
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers.got.back().status().code(), StatusCode::kFailedPrecondition);
}

TEST(Rendezvous, TheStartTimeoutAnswersAsynchronousRegistrationsNamingTheMissingRank) {
  std::promise<Status> ended;
  Rendezvous rendezvous(3, {}, 300ms, [&](const Status& s) { ended.set_value(s); });
  Answers answers;
  const auto start = std::chrono::steady_clock::now();
  rendezvous.register_async(worker_with_rank(0), answers.done());
  rendezvous.register_async(worker_with_rank(2), answers.done());
  auto end = ended.get_future();
  ASSERT_EQ(end.wait_for(5s), std::future_status::ready) << "no answer at the start timeout";
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_EQ(end.get().code(), StatusCode::kDeadlineExceeded);
  for (int i = 0; i < 100 && answers.size() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(answers.size(), 2u);
  for (const auto& a : answers.got) {
    EXPECT_EQ(a.status().code(), StatusCode::kDeadlineExceeded);
    EXPECT_NE(a.status().message().find("missing rank 1"), std::string::npos)
        << a.status().message();
  }
  ASSERT_TRUE(rendezvous.failure());
  EXPECT_EQ(rendezvous.failure()->rank, 1);
}

TEST(Rendezvous, AnAbortAnswersThemWithItsStatus) {
  Rendezvous rendezvous(2, {}, 10s, nullptr);
  Answers answers;
  rendezvous.register_async(worker_with_rank(0), answers.done());
  rendezvous.abort(aborted("job aborted: rank 5 failed"));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers.got[0].status().code(), StatusCode::kAborted);
  EXPECT_EQ(answers.got[0].status().message(), "job aborted: rank 5 failed");
}

TEST(Rendezvous, ARendezvousThatGoesCancelsThemAndStopsItsThread) {
  Answers answers;
  {
    Rendezvous rendezvous(2, {}, 1h, nullptr);
    rendezvous.register_async(worker_with_rank(1), answers.done());
  }  // would hang here if its deadline thread waited for the hour
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers.got[0].status().code(), StatusCode::kCancelled);
}

TEST(Rendezvous, AClaimThatFailsIsAnsweredAtOnce) {
  Rendezvous rendezvous(2, {}, 10s, nullptr);
  Answers answers;
  rendezvous.register_async(worker_with_rank(7), answers.done());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers.got[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(answers.got[0].status().message().find("asked for rank 7"), std::string::npos);
}

}  // namespace
}  // namespace hvrun::coordinator
