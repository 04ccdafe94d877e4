// Cross-host rounds (worker_lib/agreement/host_rounds/host_rounds.h) with their arbiter
// (round_arbiter.h) over real TCP on loopback: threads act as ranks, a ThreadBoard per simulated
// host (or none, for a host of one rank). Every rank of every host must decide alike: agreed
// with the AND of every rank's bits, disagreed, or not agreed, and refusals, a silent host, a
// host that left and an abort must end the others' waits (at once, or at the arbiter's wait).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "tests/worker/round_board_harness.h"
#include "worker_lib/agreement/host_rounds/host_rounds.h"
#include "worker_lib/agreement/host_rounds/round_arbiter.h"

namespace hvrun::detail::agreement {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr auto kArbiterWait = milliseconds(300);
constexpr size_t kWords = 8;  // a 512-bit vector: 64 bytes of payload

// Simulated hosts: ranks_per_host[h] ranks on host h (a board when more than one).
class Job {
 public:
  explicit Job(std::vector<int> ranks_per_host) {
    auto started = RoundArbiter::start("127.0.0.1", static_cast<int>(ranks_per_host.size()),
                                       kArbiterWait);
    EXPECT_TRUE(started.is_ok()) << started.status().message();
    arbiter_ = std::move(started).value();
    for (size_t h = 0; h < ranks_per_host.size(); ++h) {
      const int n = ranks_per_host[h];
      boards_.push_back(n > 1 ? std::make_unique<shm::board_test::ThreadBoard>(n) : nullptr);
      for (int local = 0; local < n; ++local) {
        std::unique_ptr<RoundLink> link;
        if (local == 0) {
          auto connected = RoundLink::connect(arbiter_->address(), milliseconds(5000));
          EXPECT_TRUE(connected.is_ok()) << connected.status().message();
          link = std::move(connected).value();
          RoundMessage hello;
          hello.value = static_cast<uint32_t>(h);
          EXPECT_TRUE(link->send(hello, nullptr).is_ok());
        }
        shm::RoundBoard* board = n > 1 ? &(*boards_.back())[local] : nullptr;
        ranks_.push_back(std::make_unique<HostRounds>(board, std::move(link),
                                                      static_cast<int>(h), milliseconds(5000)));
        host_of_.push_back(static_cast<int>(h));
      }
    }
  }
  int ranks() const { return static_cast<int>(ranks_.size()); }
  int host_of(int rank) const { return host_of_[static_cast<size_t>(rank)]; }
  HostRounds& operator[](int rank) { return *ranks_[static_cast<size_t>(rank)]; }

 private:
  std::unique_ptr<RoundArbiter> arbiter_;
  std::vector<std::unique_ptr<shm::board_test::ThreadBoard>> boards_;
  std::vector<std::unique_ptr<HostRounds>> ranks_;
  std::vector<int> host_of_;
};

struct Played {
  RoundOutcome outcome = RoundOutcome::kFailed;
  uint64_t bits[kWords] = {};
  Clock::duration took{};
};

// One rank's round: its bits, its key; the job's AND when agreed.
Played play(HostRounds& rounds, uint32_t gen, const uint64_t* bits, uint64_t key_word,
            milliseconds local_wait = milliseconds(2000)) {
  Played p;
  const auto start = Clock::now();
  const auto deadline = start + local_wait;
  std::byte* mine = rounds.open(gen, kWords * sizeof(uint64_t), deadline);
  if (mine != nullptr) {
    std::memcpy(mine, bits, kWords * sizeof(uint64_t));
    RoundKey key;
    key.words[0] = key_word;
    key.words[1] = gen;
    p.outcome = rounds.join(gen, key, deadline);
    if (p.outcome == RoundOutcome::kAgreed) rounds.and_payloads(p.bits, kWords);
  }
  rounds.release();
  p.took = Clock::now() - start;
  return p;
}

// Every rank plays `gen` on its own thread with its own bits (rank r sets bits r and 100 + r,
// and the bits every rank sets: 400-403) and key_word(rank).
template <typename KeyOf>
std::vector<Played> play_all(Job& job, uint32_t gen, KeyOf key_of) {
  std::vector<Played> results(static_cast<size_t>(job.ranks()));
  std::vector<std::thread> threads;
  for (int r = 0; r < job.ranks(); ++r)
    threads.emplace_back([&, r] {
      uint64_t bits[kWords] = {};
      bits[0] = 1ull << r;
      bits[1] = 1ull << (100 - 64 + r);
      bits[6] = 0xf0000;  // bits 400-403
      results[static_cast<size_t>(r)] = play(job[r], gen, bits, key_of(r));
    });
  for (auto& t : threads) t.join();
  return results;
}

// The ranks `plays(rank)` says play `gen` (each on its own thread, bits ~0 in word 0, key 7);
// the others' results stay default.
template <typename Plays>
std::vector<Played> play_some(Job& job, uint32_t gen, Plays plays) {
  std::vector<Played> results(static_cast<size_t>(job.ranks()));
  std::vector<std::thread> threads;
  for (int r = 0; r < job.ranks(); ++r) {
    if (!plays(r)) continue;
    threads.emplace_back([&, r] {
      uint64_t bits[kWords] = {~0ull};
      results[static_cast<size_t>(r)] = play(job[r], gen, bits, 7);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

class HostRoundsTest : public testing::TestWithParam<std::vector<int>> {};

TEST_P(HostRoundsTest, EqualKeysAgreeOnTheAndOfEveryRanksBitsOnEveryHost) {
  Job job(GetParam());
  for (uint32_t gen = 5; gen < 45; ++gen) {
    const auto results = play_all(job, gen, [](int) { return 7; });
    for (int r = 0; r < job.ranks(); ++r) {
      const Played& p = results[static_cast<size_t>(r)];
      ASSERT_EQ(p.outcome, RoundOutcome::kAgreed) << "rank " << r << " gen " << gen << ": "
                                                  << round_outcome_name(p.outcome);
      // Only the bits every rank set survive the AND.
      EXPECT_EQ(p.bits[0], 0u) << "rank " << r;
      EXPECT_EQ(p.bits[1], 0u) << "rank " << r;
      EXPECT_EQ(p.bits[6], 0xf0000u) << "rank " << r;
    }
  }
}

TEST_P(HostRoundsTest, AnotherKeyOnOneRankDisagreesEverywhere) {
  Job job(GetParam());
  for (int odd = 0; odd < job.ranks(); ++odd) {
    const auto results = play_all(job, 10 + static_cast<uint32_t>(odd),
                                  [odd](int r) { return r == odd ? 8 : 7; });
    for (int r = 0; r < job.ranks(); ++r) {
      const RoundOutcome o = results[static_cast<size_t>(r)].outcome;
      // The odd rank's host disagrees on its board; the other hosts hear the arbiter say the
      // round did not agree: every rank takes the coordinator.
      EXPECT_NE(o, RoundOutcome::kAgreed) << "odd rank " << odd << ", rank " << r;
    }
  }
}

TEST_P(HostRoundsTest, ARefusalOnAnyRankFailsTheRoundEverywhereAtOnce) {
  Job job(GetParam());
  for (int refuser = 0; refuser < job.ranks(); ++refuser) {
    const auto gen = 20 + static_cast<uint32_t>(refuser);
    job[refuser].refuse(gen);
    const auto results = play_some(job, gen, [refuser](int r) { return r != refuser; });
    for (int r = 0; r < job.ranks(); ++r) {
      if (r == refuser) continue;
      const Played& p = results[static_cast<size_t>(r)];
      EXPECT_NE(p.outcome, RoundOutcome::kAgreed) << "refuser " << refuser << ", rank " << r;
      // The refuser's host fails at once (on its board, or its speaker is the refuser) and its
      // speaker tells the arbiter: the other hosts hear it long before the arbiter's wait.
      EXPECT_LT(p.took, kArbiterWait / 2) << "refuser " << refuser << ", rank " << r;
    }
  }
}

TEST_P(HostRoundsTest, ASilentHostFailsTheRoundAtTheWaitAndLearnsItWhenItComes) {
  Job job(GetParam());
  const uint32_t gen = 30;
  const int last_host = job.host_of(job.ranks() - 1);
  auto results = play_some(job, gen, [&](int r) { return job.host_of(r) != last_host; });
  for (int r = 0; r < job.ranks(); ++r) {
    if (job.host_of(r) == last_host) continue;
    const Played& p = results[static_cast<size_t>(r)];
    EXPECT_EQ(p.outcome, RoundOutcome::kFailed) << "rank " << r;
    EXPECT_GE(p.took, kArbiterWait - milliseconds(5)) << "rank " << r;
  }
  // The late host agrees on its own board, then hears the recorded verdict: failed.
  results = play_some(job, gen, [&](int r) { return job.host_of(r) == last_host; });
  for (int r = 0; r < job.ranks(); ++r) {
    if (job.host_of(r) != last_host) continue;
    EXPECT_EQ(results[static_cast<size_t>(r)].outcome, RoundOutcome::kFailed) << "rank " << r;
  }
}

TEST_P(HostRoundsTest, AHostThatLeftFailsEveryLaterRoundAtOnce) {
  Job job(GetParam());
  const int last_host = job.host_of(job.ranks() - 1);
  for (int r = 0; r < job.ranks(); ++r)
    if (job.host_of(r) == last_host) job[r].leave();
  for (uint32_t gen = 40; gen < 43; ++gen) {
    const auto results =
        play_some(job, gen, [&](int r) { return job.host_of(r) != last_host; });
    for (int r = 0; r < job.ranks(); ++r) {
      if (job.host_of(r) == last_host) continue;
      const Played& p = results[static_cast<size_t>(r)];
      EXPECT_EQ(p.outcome, RoundOutcome::kFailed) << "rank " << r << " gen " << gen;
      EXPECT_LT(p.took, kArbiterWait) << "rank " << r << " gen " << gen;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(host_rounds, HostRoundsTest,
                         testing::Values(std::vector<int>{1, 1}, std::vector<int>{2, 2},
                                         std::vector<int>{2, 1, 3}));

TEST(HostRounds, AnAbortEndsTheWaitForTheVerdict) {
  Job job({1, 1});
  // Host 1 never comes, and the arbiter would answer only at its wait: the abort comes first.
  std::thread aborter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    job[0].abort();
  });
  uint64_t bits[kWords] = {~0ull};
  const Played p = play(job[0], 3, bits, 7);
  aborter.join();
  EXPECT_EQ(p.outcome, RoundOutcome::kAborted);
  EXPECT_LT(p.took, kArbiterWait);
  // And every later round fails at once.
  const Played after = play(job[0], 4, bits, 7);
  EXPECT_NE(after.outcome, RoundOutcome::kAgreed);
  EXPECT_LT(after.took, milliseconds(100));
}

}  // namespace
}  // namespace hvrun::detail::agreement
