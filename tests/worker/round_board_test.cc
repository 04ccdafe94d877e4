// The shared-memory round board (worker_lib/backends/shm/round_board.h), alone: threads act as
// ranks, one RoundBoard per rank over one formatted block of memory; two tests use forked
// processes over a MAP_SHARED mapping. What is checked, per round (gen):
//  - safety: every rank that got an outcome got the same class (agreed / disagreed / not), and an
//    agreed round's payload(k) holds exactly what rank k wrote for that gen (no torn or stale
//    bytes, also when read again after a delay, while faster peers race ahead to reuse the slot);
//  - liveness: refusals and aborts end peers' waits at once, an absent rank at the deadline, and
//    no call outlives its deadline by much.
// A step that must find peers asleep in the board's futex wait (to check that it wakes them)
// waits until the kernel says they are (tests/support/futex_sleep.h), never for a sleep to be
// long enough. The randomised stress test's sleeps are lateness under test, not ordering; every
// wait is bounded.
#include "worker_lib/backends/shm/round_board.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/support/futex_sleep.h"

namespace hvrun::detail::shm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr size_t kSpillMax = RoundBoard::kPayloadBytes;

// "At once": well under the board's longest futex sleep (1 s), so a missed wake-up shows, and
// far above scheduling delays on a busy 2-core machine.
constexpr double kPromptMs = 500;

Clock::time_point in(Clock::duration d) { return Clock::now() + d; }

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Orders test steps across ranks (never the board's waits): until count >= n, 20 s at most.
void await(const std::atomic<int>& count, int n) {
  const auto until = in(seconds(20));
  while (count.load() < n && Clock::now() < until) std::this_thread::yield();
}

// When a step happened, for peers on other threads (or processes: the clock is the system's
// monotonic one) to measure how promptly it woke them: 0 until it has.
using Stamp = std::atomic<Clock::rep>;
void stamp_now(Stamp& stamp) { stamp = Clock::now().time_since_epoch().count(); }
Clock::time_point time_of(const Stamp& stamp) {
  return Clock::time_point{Clock::duration(stamp.load())};
}
bool happened(const Stamp& stamp) { return stamp.load() != 0; }

// Until every thread of `tids` sleeps in futex(2) (peers waiting in the board), 20 s at most.
void await_asleep(const std::vector<pid_t>& tids) {
  EXPECT_TRUE(test::wait_until_asleep_in_futex(tids, seconds(20)))
      << "peers never went to sleep in the board's futex wait";
}

// The thread ids of every rank but `except`, once each has written its own into `tids`.
std::vector<pid_t> all_but(const std::vector<pid_t>& tids, int except) {
  std::vector<pid_t> out;
  for (size_t r = 0; r < tids.size(); ++r)
    if (static_cast<int>(r) != except) out.push_back(tids[r]);
  return out;
}

// Every 8 bytes of rank r's payload for gen g are distinct from any other (g, r)'s, so a torn
// or stale payload never passes for the right one.
uint64_t payload_word(uint32_t gen, int rank, size_t index) {
  return (static_cast<uint64_t>(gen) << 32) ^ (static_cast<uint64_t>(rank) << 24) ^
         (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull) ^ 0x00A5C3E1ull;
}

void fill_payload(std::byte* p, size_t bytes, uint32_t gen, int rank) {
  for (size_t off = 0; off < bytes; off += 8) {
    const uint64_t w = payload_word(gen, rank, off / 8);
    std::memcpy(p + off, &w, std::min<size_t>(8, bytes - off));
  }
}

// Empty when `p` holds what `rank` wrote for `gen`; else where and what differs.
std::string payload_error(const std::byte* p, size_t bytes, uint32_t gen, int rank) {
  for (size_t off = 0; off < bytes; off += 8) {
    const uint64_t want = payload_word(gen, rank, off / 8);
    uint64_t got = want;
    std::memcpy(&got, p + off, std::min<size_t>(8, bytes - off));  // a short tail: rest as wanted
    if (got != want)
      return "rank " + std::to_string(rank) + "'s " + std::to_string(bytes) +
             "-byte payload for gen " + std::to_string(gen) + " differs at byte " +
             std::to_string(off) + " (its high word: " + std::to_string(got >> 32) +
             ", a stale gen?)";
  }
  return {};
}

// What the runtime's key holds: which collective (variant), its size, the event count (gen).
RoundKey make_key(uint32_t gen, size_t bytes, uint64_t variant = 0) {
  return RoundKey{{gen, bytes, variant, 0xfeedull, 42}};
}

// Empty when every rank's payload is right for an agreed round.
std::string check_payloads(const RoundBoard& board, int ranks, size_t bytes, uint32_t gen) {
  for (int k = 0; k < ranks; ++k) {
    std::string e = payload_error(board.payload(k), bytes, gen, k);
    if (!e.empty()) return e;
  }
  return {};
}

// A board's memory for threads (aligned_alloc, formatted), and one RoundBoard per rank on it.
class ThreadBoard {
 public:
  explicit ThreadBoard(int ranks)
      : memory_(std::aligned_alloc(4096, (RoundBoard::bytes_needed(ranks) + 4095) / 4096 * 4096),
                &std::free) {
    if (memory_ == nullptr) std::abort();
    RoundBoard::initialise(memory_.get(), ranks);
    for (int r = 0; r < ranks; ++r)
      boards_.push_back(std::make_unique<RoundBoard>(memory_.get(), r, ranks));
  }
  RoundBoard& operator[](int rank) { return *boards_[static_cast<size_t>(rank)]; }
  int ranks() const { return static_cast<int>(boards_.size()); }

 private:
  std::unique_ptr<void, decltype(&std::free)> memory_;
  std::vector<std::unique_ptr<RoundBoard>> boards_;  // destroyed before the memory
};

// Runs body(rank) on one thread per rank and waits at most `limit`. A hang fails the test instead
// of stalling it: the board is aborted (which ends every board wait) and, should a thread still
// not finish, the process exits (its threads reference this frame).
void run_ranks(ThreadBoard& board, seconds limit, const std::function<void(int)>& body) {
  std::mutex mutex;
  std::condition_variable cv;
  int finished = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < board.ranks(); ++r)
    threads.emplace_back([&, r] {
      body(r);
      std::lock_guard<std::mutex> lock(mutex);
      ++finished;
      cv.notify_all();
    });
  std::unique_lock<std::mutex> lock(mutex);
  if (!cv.wait_for(lock, limit, [&] { return finished == board.ranks(); })) {
    ADD_FAILURE() << "ranks still running after " << limit.count() << " s: aborting the board";
    board[0].abort();
    if (!cv.wait_for(lock, seconds(10), [&] { return finished == board.ranks(); })) {
      std::fprintf(stderr, "round_board_test: ranks hang even after abort()\n");
      std::_Exit(3);
    }
  }
  lock.unlock();
  for (auto& t : threads) t.join();
}

// One normal round for `rank`: open, write its payload, join, check every payload when agreed,
// release. `error` gets the first payload mismatch. nullopt when open() returned null.
std::optional<RoundOutcome> play(RoundBoard& board, int rank, int ranks, uint32_t gen, size_t bytes,
                                 const RoundKey& key, Clock::time_point deadline,
                                 std::string* error) {
  std::byte* mine = board.open(gen, bytes, deadline);
  if (mine == nullptr) {
    board.release();
    return std::nullopt;
  }
  fill_payload(mine, bytes, gen, rank);
  const RoundOutcome outcome = board.join(gen, key, deadline);
  if (outcome == RoundOutcome::kAgreed && error->empty())
    *error = check_payloads(board, ranks, bytes, gen);
  board.release();
  return outcome;
}

std::string name_of(std::optional<RoundOutcome> o) { return o ? round_outcome_name(*o) : "null"; }

// The round did not happen here: open() was null (refused already) or join() failed.
bool not_agreed(std::optional<RoundOutcome> o) { return !o || *o == RoundOutcome::kFailed; }

// ---- equal keys agree, any different key disagrees everywhere -----------------------------------
class AgreeTest : public testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(AgreeTest, EqualKeysAgreeWithExactPayloadsAndAnyOtherKeyDisagreesEverywhere) {
  const auto [ranks, bytes] = GetParam();
  const int rounds = bytes <= RoundBoard::kInlineBytes ? 4000 : 1500;
  ThreadBoard board(ranks);
  std::atomic<int> wrong{0};
  run_ranks(board, seconds(60), [&](int rank) {
    uint32_t gen = 3;  // the runtime's first round is at whatever event count it reached
    for (int i = 0; i < rounds + 300; ++i) {
      // After `rounds` rounds with equal keys, every 3rd round has one rank (in turn) wanting
      // another collective, at times of another size too (spill vs inline): all must disagree.
      const bool odd_round = i >= rounds && i % 3 == 1;
      const bool odd_one_here = odd_round && (i / 3) % ranks == rank;
      const size_t mine = !odd_one_here || i % 2              ? bytes
                          : bytes <= RoundBoard::kInlineBytes ? kSpillMax
                                                              : 8;
      std::string error;
      const auto outcome = play(board[rank], rank, ranks, gen, mine,
                                make_key(gen, mine, odd_one_here ? 7 : 0), in(seconds(10)), &error);
      const RoundOutcome want = odd_round ? RoundOutcome::kDisagreed : RoundOutcome::kAgreed;
      if ((outcome != want || !error.empty()) && wrong++ < 5)
        ADD_FAILURE() << "rank " << rank << " gen " << gen << ": " << name_of(outcome) << ", want "
                      << round_outcome_name(want) << " " << error;
      // Every 7th step all ranks skip gens together (plans executed in between: no chaining).
      gen += (i % 7 == 6) ? 3 : 1;
    }
  });
  EXPECT_EQ(wrong.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(round_board, AgreeTest,
                         testing::Combine(testing::Values(2, 3, 4),
                                          testing::Values(size_t{0}, size_t{8},
                                                          RoundBoard::kInlineBytes, size_t{4096},
                                                          kSpillMax)));

class RanksTest : public testing::TestWithParam<int> {};

// ---- refusals end peers' waits at once ----------------------------------------------------------
// The refuser says it will not come: before peers open, while they wait, or by opening with a
// payload too large for the board (open() refuses for it).
TEST_P(RanksTest, ARefusalBeforeOrDuringTheWaitFailsPeersPromptly) {
  const int ranks = GetParam();
  const int refuser = ranks - 1;
  for (const std::string mode : {"before", "during", "oversized"}) {
    SCOPED_TRACE("refused " + mode);
    ThreadBoard board(ranks);
    constexpr uint32_t kGen = 11;
    if (mode == "before") board[refuser].refuse(kGen);
    std::atomic<int> peers_in{0}, peers_out{0};
    std::vector<pid_t> tids(static_cast<size_t>(ranks));
    Stamp refused_at{0};
    run_ranks(board, seconds(30), [&](int rank) {
      std::string error;
      EXPECT_EQ(play(board[rank], rank, ranks, kGen - 1, 16, make_key(kGen - 1, 16),
                     in(seconds(10)), &error),
                RoundOutcome::kAgreed);
      if (rank == refuser) {  // never joins kGen
        if (mode != "before") {  // refuses while the peers sleep in their wait for kGen
          await(peers_in, ranks - 1);
          await_asleep(all_but(tids, refuser));
          stamp_now(refused_at);
        }
        if (mode == "during") board[rank].refuse(kGen);
        const bool oversized = mode == "oversized";
        const std::byte* p =
            oversized ? board[rank].open(kGen, kSpillMax + 1, in(seconds(10))) : nullptr;
        EXPECT_EQ(p, nullptr);
        await(peers_out, ranks - 1);  // the refusal alone must wake them: no other step first
        if (oversized) board[rank].release();
      } else {
        tids[static_cast<size_t>(rank)] = test::this_thread_id();
        peers_in.fetch_add(1);
        const auto start = Clock::now();
        const auto outcome =
            play(board[rank], rank, ranks, kGen, 16, make_key(kGen, 16), in(seconds(10)), &error);
        EXPECT_EQ(name_of(outcome), "failed") << "rank " << rank;
        if (mode != "before") {
          EXPECT_TRUE(happened(refused_at)) << "rank " << rank << " failed before the refusal";
        }
        const auto refused = mode == "before" ? start : time_of(refused_at);
        EXPECT_LT(ms_since(refused), kPromptMs) << "rank " << rank << " missed the refusal";
        peers_out.fetch_add(1);
      }  // all meet again in the next round
      const auto next = play(board[rank], rank, ranks, kGen + 1, 4096, make_key(kGen + 1, 4096),
                             in(seconds(10)), &error);
      EXPECT_EQ(name_of(next), "agreed") << "rank " << rank << " " << error;
    });
  }
}

// A rank arriving late (peers asleep in join by then) wakes them by arriving: it waits for their
// return before releasing, so no later step of it can wake them instead.
TEST_P(RanksTest, ALateArrivalWakesPeersWaitingInJoin) {
  const int ranks = GetParam();
  const int late = ranks - 1;
  ThreadBoard board(ranks);
  std::atomic<int> waiting{0}, peers_out{0};
  Stamp arrived_at{0};
  std::vector<pid_t> tids(static_cast<size_t>(ranks));
  run_ranks(board, seconds(30), [&](int rank) {
    std::byte* p = board[rank].open(3, 16, in(seconds(10)));
    ASSERT_NE(p, nullptr);
    fill_payload(p, 16, 3, rank);
    if (rank == late) {
      await(waiting, ranks - 1);
      await_asleep(all_but(tids, late));
      stamp_now(arrived_at);
    } else {
      tids[static_cast<size_t>(rank)] = test::this_thread_id();
      waiting.fetch_add(1);
    }
    EXPECT_EQ(board[rank].join(3, make_key(3, 16), in(seconds(10))), RoundOutcome::kAgreed);
    EXPECT_EQ(check_payloads(board[rank], ranks, 16, 3), "");
    EXPECT_TRUE(rank == late || (happened(arrived_at) && ms_since(time_of(arrived_at)) < kPromptMs))
        << "rank " << rank << " slept on, or returned before the late rank arrived";
    peers_out.fetch_add(rank == late ? 0 : 1);
    await(peers_out, ranks - 1);  // the late rank releases (a ring) only once they returned
    board[rank].release();
  });
}

TEST_P(RanksTest, AnAbsentRankIsRefusedAtTheDeadlineAndCannotJoinLate) {
  const int ranks = GetParam();
  const int absent = ranks - 1;
  constexpr uint32_t kGen = 20;
  ThreadBoard board(ranks);
  const auto start = Clock::now();
  const auto deadline = start + milliseconds(20);  // nothing fails the round before it
  // Peers run kGen without the absent rank (it does nothing meanwhile).
  run_ranks(board, seconds(30), [&](int rank) {
    if (rank == absent) return;
    std::string error;
    // A peer slower than the deadline may be refused by another: then its open() is null.
    const auto outcome =
        play(board[rank], rank, ranks, kGen, 16, make_key(kGen, 16), deadline, &error);
    const double waited = ms_since(start);
    EXPECT_TRUE(not_agreed(outcome)) << "rank " << rank << ": " << name_of(outcome);
    EXPECT_GE(waited, 20.0) << "rank " << rank << " gave up before the deadline";
    EXPECT_LT(waited, kPromptMs) << "rank " << rank << " overran its 20 ms deadline";
  });
  // The late rank: refused already, so no agreement for kGen (null open, or failed), at once.
  std::string late_error;
  const auto late_start = Clock::now();
  const auto late_outcome =
      play(board[absent], absent, ranks, kGen, 16, make_key(kGen, 16), in(seconds(5)), &late_error);
  EXPECT_TRUE(not_agreed(late_outcome)) << name_of(late_outcome);
  EXPECT_LT(ms_since(late_start), kPromptMs);
  // And everyone meets again in the next round.
  run_ranks(board, seconds(30), [&](int rank) {
    std::string error;
    const auto next = play(board[rank], rank, ranks, kGen + 1, kSpillMax,
                           make_key(kGen + 1, kSpillMax), in(seconds(10)), &error);
    EXPECT_EQ(name_of(next), "agreed") << "rank " << rank << " " << error;
  });
}

// ---- abort: ends every wait at once, fails later rounds -----------------------------------------
// Ranks other than `absent` open round `gen`, arrive and wait for it (deadline 30 s) while
// another thread aborts the board: each must return kAborted at once.
void peers_wait_until_abort(ThreadBoard& board, int absent, uint32_t gen) {
  std::atomic<int> waiting{0};
  std::vector<pid_t> tids(static_cast<size_t>(board.ranks()));
  Stamp aborted_at{0};
  std::thread aborter([&] {
    await(waiting, board.ranks() - 1);
    await_asleep(all_but(tids, absent));
    stamp_now(aborted_at);
    board[absent].abort();
  });
  run_ranks(board, seconds(30), [&](int rank) {
    if (rank == absent) return;
    std::byte* p = board[rank].open(gen, 8, in(seconds(30)));
    ASSERT_NE(p, nullptr);
    fill_payload(p, 8, gen, rank);
    tids[static_cast<size_t>(rank)] = test::this_thread_id();
    waiting.fetch_add(1);
    EXPECT_EQ(round_outcome_name(board[rank].join(gen, make_key(gen, 8), in(seconds(30)))),
              std::string("aborted"));
    ASSERT_TRUE(happened(aborted_at)) << "rank " << rank << " returned before the abort";
    EXPECT_LT(ms_since(time_of(aborted_at)), kPromptMs);
    board[rank].release();
  });
  aborter.join();
}

TEST_P(RanksTest, AbortWakesRanksWaitingInJoinAndFailsLaterRounds) {
  const int ranks = GetParam();
  ThreadBoard board(ranks);
  peers_wait_until_abort(board, ranks - 1, 8);
  const auto later = Clock::now();
  for (int r = 0; r < ranks; ++r) {  // later rounds: null at once
    EXPECT_TRUE(board[r].aborted());
    EXPECT_EQ(board[r].open(9, 8, in(seconds(10))), nullptr) << "rank " << r;
    board[r].release();
  }
  EXPECT_LT(ms_since(later), kPromptMs);
}

// A round in progress when abort() lands must not end agreed on one rank and aborted on another
// (header: abort "fails every round in progress"). The last rank opened before the abort and
// joins after its peers returned kAborted. (A wait() that ends on the abort before the state
// words settle would let the late joiner find them complete and agree alone; join() therefore
// refuses the missing peers on an abort as it does at the deadline.)
TEST_P(RanksTest, AnAbortNeverSplitsARoundInProgress) {
  const int ranks = GetParam();
  ThreadBoard board(ranks);
  std::byte* p = board[ranks - 1].open(8, 8, in(seconds(10)));
  ASSERT_NE(p, nullptr);
  fill_payload(p, 8, 8, ranks - 1);
  peers_wait_until_abort(board, ranks - 1, 8);
  EXPECT_NE(board[ranks - 1].join(8, make_key(8, 8), in(seconds(10))), RoundOutcome::kAgreed)
      << "its peers got kAborted in this round";
  board[ranks - 1].release();
}

TEST_P(RanksTest, AbortWakesARankWaitingInOpenForABusySlot) {
  const int ranks = GetParam();
  ThreadBoard board(ranks);
  std::atomic<int> in_open{0}, out_of_open{0};
  Stamp aborted_at{0};
  std::vector<pid_t> tids(static_cast<size_t>(ranks));
  run_ranks(board, seconds(30), [&](int rank) {
    std::byte* p = board[rank].open(0, 16, in(seconds(10)));
    ASSERT_NE(p, nullptr);
    fill_payload(p, 16, 0, rank);
    ASSERT_EQ(board[rank].join(0, make_key(0, 16), in(seconds(10))), RoundOutcome::kAgreed);
    if (rank == 0) {
      // Holds round 0 while peers wait for its slot (gen 4), then aborts.
      await(in_open, ranks - 1);
      await_asleep(all_but(tids, 0));
      stamp_now(aborted_at);
      board[rank].abort();
      // Releases once the peers' open() returned (a slot freed as the abort lands lets it in).
      await(out_of_open, ranks - 1);
      board[rank].release();
      return;
    }
    board[rank].release();
    std::string error;
    for (uint32_t gen = 1; gen < 4; ++gen)  // rank 0 is absent: they fail at 2 ms
      EXPECT_TRUE(not_agreed(
          play(board[rank], rank, ranks, gen, 16, make_key(gen, 16), in(milliseconds(2)), &error)));
    tids[static_cast<size_t>(rank)] = test::this_thread_id();
    in_open.fetch_add(1);
    EXPECT_EQ(board[rank].open(4, 16, in(seconds(30))), nullptr) << "rank " << rank;
    out_of_open.fetch_add(1);
    ASSERT_TRUE(happened(aborted_at)) << "rank " << rank << "'s open() returned before the abort";
    EXPECT_LT(ms_since(time_of(aborted_at)), kPromptMs);
    board[rank].release();
  });
}

INSTANTIATE_TEST_SUITE_P(round_board, RanksTest, testing::Values(2, 3, 4));

// ---- slot reuse waits for a slow reader ---------------------------------------------------------
class SlowReaderTest : public testing::TestWithParam<std::tuple<int, size_t>> {};

// Rank 0 reads round g slowly. Peers fail g+1..g+3 without it and reach g+4 (the same slot):
// their open() must wait for rank 0's release (long deadline) or give up at their deadline
// (short one); either way rank 0's view of round g stays intact until it releases.
TEST_P(SlowReaderTest, ASlowReaderKeepsItsRoundUntilItReleases) {
  const auto [ranks, bytes] = GetParam();
  for (const bool peers_wait_long : {true, false}) {
    SCOPED_TRACE(peers_wait_long ? "peers wait for the slot" : "peers give up at 30 ms");
    ThreadBoard board(ranks);
    constexpr uint32_t g = 40;
    std::atomic<int> peers_opening{0}, peers_done{0};  // peers in open(g+4), out of it
    Stamp released_at{0};                              // when rank 0 released round g
    std::vector<pid_t> tids(static_cast<size_t>(ranks));
    run_ranks(board, seconds(60), [&](int rank) {
      RoundBoard& b = board[rank];
      std::string error;
      std::byte* p = b.open(g, bytes, in(seconds(10)));
      ASSERT_NE(p, nullptr);
      fill_payload(p, bytes, g, rank);
      ASSERT_EQ(b.join(g, make_key(g, bytes), in(seconds(10))), RoundOutcome::kAgreed);
      EXPECT_EQ(check_payloads(b, ranks, bytes, g), "");
      if (rank == 0) {
        await(peers_wait_long ? peers_opening : peers_done, ranks - 1);
        if (peers_wait_long) await_asleep(all_but(tids, 0));  // in open(g+4)
        EXPECT_EQ(check_payloads(b, ranks, bytes, g), "") << "round g overwritten before release";
        stamp_now(released_at);
        b.release();
        await(peers_done, ranks - 1);  // the release alone must wake them: no other step first
        // Skips g+1..g+3 (peers refused it there); meets them at g+4 or g+5.
        const auto outcome =
            play(b, rank, ranks, g + 4, bytes, make_key(g + 4, bytes), in(seconds(10)), &error);
        EXPECT_EQ(name_of(outcome), peers_wait_long ? "agreed" : "failed");
      } else {
        b.release();
        for (uint32_t gen = g + 1; gen <= g + 3; ++gen)
          EXPECT_TRUE(not_agreed(
              play(b, rank, ranks, gen, bytes, make_key(gen, bytes), in(milliseconds(3)), &error)));
        tids[static_cast<size_t>(rank)] = test::this_thread_id();
        peers_opening.fetch_add(1);
        const auto start = Clock::now();
        std::byte* q = b.open(g + 4, bytes, in(peers_wait_long ? seconds(10) : milliseconds(30)));
        const Clock::time_point released = time_of(released_at);
        const bool was_released = happened(released_at);
        peers_done.fetch_add(1);
        if (peers_wait_long) {
          ASSERT_NE(q, nullptr) << "rank " << rank;
          EXPECT_TRUE(was_released) << "rank " << rank << " reused round g's slot before "
                                    << "rank 0 released it";
          EXPECT_LT(ms_since(released), kPromptMs) << "rank " << rank << " missed the release";
          fill_payload(q, bytes, g + 4, rank);
          EXPECT_EQ(b.join(g + 4, make_key(g + 4, bytes), in(seconds(10))), RoundOutcome::kAgreed);
          EXPECT_EQ(check_payloads(b, ranks, bytes, g + 4), "");
        } else {
          EXPECT_EQ(q, nullptr) << "rank " << rank << " got the slot while rank 0 held it";
          EXPECT_FALSE(was_released);
          EXPECT_LT(ms_since(start), kPromptMs);
        }
        b.release();
      }
      EXPECT_EQ(error, "");
      const auto next =
          play(b, rank, ranks, g + 5, bytes, make_key(g + 5, bytes), in(seconds(10)), &error);
      EXPECT_EQ(name_of(next), "agreed") << "rank " << rank << " " << error;
    });
  }
}

INSTANTIATE_TEST_SUITE_P(round_board, SlowReaderTest,
                         testing::Combine(testing::Values(2, 3, 4),
                                          testing::Values(RoundBoard::kInlineBytes, kSpillMax)));

// ---- randomised stress --------------------------------------------------------------------------
// What a rank does at a gen, and what it saw.
enum class Act : uint8_t { kJoin, kJoinLate, kJoinOtherKey, kRefuse, kRefuseLate, kSkip };
enum class Seen : uint8_t { kNothing, kNullOpen, kAgreed, kDisagreed, kFailed, kAborted };
static_assert(static_cast<int>(RoundOutcome::kAgreed) == 0 &&
              static_cast<int>(RoundOutcome::kAborted) == 3);

constexpr const char* kActNames[] = {"join",   "join-late",   "join-other-key",
                                     "refuse", "refuse-late", "skip"};
constexpr const char* kSeenNames[] = {"-", "null-open", "agreed", "disagreed", "failed", "aborted"};
struct Cell {
  Act act = Act::kSkip;
  Seen seen = Seen::kNothing;
};

// The gens every rank walks through (like the runtime's event counts: sometimes several plans
// pass between two rounds) and each round's payload size, from one seed.
struct Round {
  uint32_t gen;
  size_t bytes;
};

std::vector<Round> make_schedule(int rounds, uint64_t seed) {
  static constexpr size_t kSizes[] = {0, 1, 8, 16, 17, 256, 4096, kSpillMax};
  std::mt19937_64 rng(seed);
  std::vector<Round> schedule;
  for (uint32_t gen = 7; schedule.size() < static_cast<size_t>(rounds);
       gen += rng() % 10 == 0 ? 2 + static_cast<uint32_t>(rng() % 4) : 1)
    schedule.push_back({gen, kSizes[rng() % std::size(kSizes)]});
  return schedule;
}

struct RankReport {
  int payload_errors = 0;
  std::string first_error;
  double max_overrun_ms = 0;  // how long past its deadline a call returned, at worst
};

// A small random pause: nothing, a yield, or a short sleep.
void jitter(std::mt19937_64& rng) {
  const auto roll = rng() % 100;
  if (roll >= 70) std::this_thread::yield();
  if (roll >= 98) std::this_thread::sleep_for(microseconds(rng() % 200));
}

void stress_rank(RoundBoard& b, int rank, int ranks, const std::vector<Round>& schedule,
                 uint64_t seed, Cell* cells, RankReport& report) {
  std::mt19937_64 rng(seed * 1000003 + static_cast<uint64_t>(rank));
  auto note_overrun = [&](Clock::time_point deadline) {
    report.max_overrun_ms = std::max(report.max_overrun_ms, ms_since(deadline));
  };
  auto check = [&](uint32_t gen, size_t bytes) {
    std::string e = check_payloads(b, ranks, bytes, gen);
    if (!e.empty() && report.payload_errors++ == 0) report.first_error = e;
  };
  for (size_t i = 0; i < schedule.size(); ++i) {
    const uint32_t gen = schedule[i].gen;
    Cell& cell = cells[i * static_cast<size_t>(ranks) + static_cast<size_t>(rank)];
    const auto wait = microseconds(100 + rng() % 1500);
    const auto roll = rng() % 1000;
    cell.act = roll < 10   ? Act::kSkip
               : roll < 20 ? Act::kRefuse
               : roll < 30 ? Act::kRefuseLate
               : roll < 55 ? Act::kJoinOtherKey
               : roll < 70 ? Act::kJoinLate
                           : Act::kJoin;
    jitter(rng);
    if (cell.act == Act::kSkip) continue;  // never comes; simply moves on
    if (cell.act == Act::kRefuse || cell.act == Act::kRefuseLate) {
      if (cell.act == Act::kRefuseLate)
        std::this_thread::sleep_for(microseconds(rng() % static_cast<uint64_t>(wait.count())));
      b.refuse(gen);
      continue;
    }
    if (cell.act == Act::kJoinLate)  // about when the peers' deadlines pass: races their refusals
      std::this_thread::sleep_for(wait / 2 +
                                  microseconds(rng() % static_cast<uint64_t>(wait.count())));
    size_t bytes = schedule[i].bytes;
    uint64_t variant = 0;
    if (cell.act == Act::kJoinOtherKey) {
      variant = static_cast<uint64_t>(rank) + 1;
      if (rng() % 2) bytes = bytes <= RoundBoard::kInlineBytes ? kSpillMax : 8;
    }
    const auto deadline = in(wait);
    std::byte* mine = b.open(gen, bytes, deadline);
    note_overrun(deadline);
    if (mine == nullptr) {
      cell.seen = Seen::kNullOpen;
      b.release();
      continue;
    }
    fill_payload(mine, bytes, gen, rank);
    jitter(rng);
    const RoundOutcome outcome = b.join(gen, make_key(gen, bytes, variant), deadline);
    note_overrun(deadline);
    cell.seen = static_cast<Seen>(2 + static_cast<int>(outcome));  // Seen's order after kNullOpen
    if (outcome == RoundOutcome::kAgreed) {
      check(gen, bytes);
      // A slow reader: sometimes long enough for peers to fail the next three rounds at their
      // deadlines and reach this slot again; they must not overwrite it before the release.
      const auto slow = rng() % 1000;
      std::this_thread::sleep_for(slow < 3    ? microseconds(3000 + rng() % 4000)
                                  : slow < 13 ? microseconds(100 + rng() % 900)
                                              : microseconds(0));
      if (slow < 113) std::this_thread::yield();
      check(gen, bytes);
    }
    b.release();
  }
}

// Empty when round i's outcomes are consistent.
std::string round_error(const Cell* row, int ranks) {
  int agreed = 0, disagreed = 0, aborted = 0, normal = 0, joined = 0;
  for (int r = 0; r < ranks; ++r) {
    agreed += row[r].seen == Seen::kAgreed;
    disagreed += row[r].seen == Seen::kDisagreed;
    aborted += row[r].seen == Seen::kAborted;
    normal += row[r].act == Act::kJoin || row[r].act == Act::kJoinLate;
    joined += row[r].act == Act::kJoin || row[r].act == Act::kJoinLate ||
              row[r].act == Act::kJoinOtherKey;
  }
  const bool ok = aborted == 0 && (agreed == 0 || (agreed == ranks && normal == ranks)) &&
                  (disagreed == 0 || (disagreed == ranks && joined == ranks && normal < ranks));
  if (ok) return {};
  std::string text;
  for (int r = 0; r < ranks; ++r)
    text += " rank " + std::to_string(r) + ": " + kActNames[static_cast<int>(row[r].act)] + " -> " +
            kSeenNames[static_cast<int>(row[r].seen)] + ";";
  return text;
}

class StressTest : public testing::TestWithParam<int> {};

TEST_P(StressTest, EveryRankSeesTheSameOutcomeAndExactPayloadsUnderRandomInterleavings) {
  const int ranks = GetParam();
  constexpr int kRounds = 20000;
  const uint64_t seed = 20261130u + static_cast<uint64_t>(ranks);
  const std::vector<Round> schedule = make_schedule(kRounds, seed);
  std::vector<Cell> cells(static_cast<size_t>(kRounds) * static_cast<size_t>(ranks));
  std::vector<RankReport> reports(static_cast<size_t>(ranks));
  ThreadBoard board(ranks);
  const auto start = Clock::now();
  run_ranks(board, seconds(100), [&](int rank) {
    stress_rank(board[rank], rank, ranks, schedule, seed, cells.data(),
                reports[static_cast<size_t>(rank)]);
  });
  const double took_ms = ms_since(start);

  int bad_rounds = 0, agreed = 0, disagreed = 0, failed = 0;
  for (int i = 0; i < kRounds; ++i) {
    const Cell* row = &cells[static_cast<size_t>(i) * static_cast<size_t>(ranks)];
    const std::string e = round_error(row, ranks);
    if (!e.empty() && bad_rounds++ < 10)
      ADD_FAILURE() << "gen " << schedule[static_cast<size_t>(i)].gen << " (round " << i << ", "
                    << schedule[static_cast<size_t>(i)].bytes << " bytes):" << e;
    agreed += row[0].seen == Seen::kAgreed;
    disagreed += row[0].seen == Seen::kDisagreed;
    failed += row[0].seen == Seen::kFailed || row[0].seen == Seen::kNullOpen;
  }
  EXPECT_EQ(bad_rounds, 0);
  double overrun_ms = 0;
  for (int r = 0; r < ranks; ++r) {
    const RankReport& rep = reports[static_cast<size_t>(r)];
    EXPECT_EQ(rep.payload_errors, 0) << "rank " << r << ": " << rep.first_error;
    overrun_ms = std::max(overrun_ms, rep.max_overrun_ms);
  }
  std::printf(
      "%d ranks, %d rounds in %.0f ms: %d agreed, %d disagreed, %d failed (rank 0's view);"
      " worst return past a deadline %.2f ms\n",
      ranks, kRounds, took_ms, agreed, disagreed, failed, overrun_ms);
  EXPECT_LT(overrun_ms, 1000.0);   // liveness: no call outlives its deadline by much (2 busy cores)
  EXPECT_GT(agreed, kRounds / 5);  // not vacuous: every kind of round happened often
  EXPECT_GT(disagreed, 50);
  EXPECT_GT(failed, 500);
}

INSTANTIATE_TEST_SUITE_P(round_board, StressTest, testing::Values(2, 3, 4));

// ---- across processes ---------------------------------------------------------------------------
// A board in a MAP_SHARED anonymous mapping, inherited by forked children, and a counter and a
// stamp after it.
class ProcessBoard {
 public:
  explicit ProcessBoard(int ranks)
      : bytes_((RoundBoard::bytes_needed(ranks) + 4095) / 4096 * 4096 + 4096),
        memory_(::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)),
        counter_(new (static_cast<std::byte*>(memory_) + bytes_ - 4096) std::atomic<int>{0}),
        stamp_(new (static_cast<std::byte*>(memory_) + bytes_ - 4096 + 64) Stamp{0}) {
    RoundBoard::initialise(memory_, ranks);
  }
  ~ProcessBoard() { ::munmap(memory_, bytes_); }
  ProcessBoard(const ProcessBoard&) = delete;
  ProcessBoard& operator=(const ProcessBoard&) = delete;
  void* memory() const { return memory_; }
  std::atomic<int>& counter() { return *counter_; }
  Stamp& stamp() { return *stamp_; }

 private:
  size_t bytes_;
  void* memory_;  // MAP_FAILED would crash at once, in the constructor
  std::atomic<int>* counter_;
  Stamp* stamp_;
};

// Forks one child per rank running body(rank), whose return value is its exit status; runs
// `meanwhile(their pids)` in the parent, then waits at most `limit` for all. Returns each
// child's exit status (-1: killed by a signal, or still running at the limit: then SIGKILLed by
// pid and reaped; -2: never started, fork failed).
std::vector<int> run_children(
    int ranks, seconds limit, const std::function<int(int)>& body,
    const std::function<void(const std::vector<pid_t>&)>& meanwhile = {}) {
  std::fflush(nullptr);  // buffered output would be written once per child too
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) std::_Exit(body(r));
    if (pid < 0) break;  // its status stays -2 (never started): the caller's check fails
    pids.push_back(pid);
  }
  if (meanwhile) meanwhile(pids);
  constexpr int kRunning = -2;
  std::vector<int> status(static_cast<size_t>(ranks), kRunning);
  const auto until = in(limit);
  for (size_t left = pids.size(); left > 0 && Clock::now() < until;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int st = 0;
      if (status[i] != kRunning || ::waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
      status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      --left;
    }
    if (left > 0) std::this_thread::sleep_for(milliseconds(1));  // polling a bounded wait
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (status[i] != kRunning) continue;
    ADD_FAILURE() << "child rank " << i << " (pid " << pids[i] << ") still running after "
                  << limit.count() << " s: killed";
    ::kill(pids[i], SIGKILL);
    ::waitpid(pids[i], &status[i], 0);
    status[i] = -1;
  }
  return status;
}

enum ChildExit { kChildOk = 0, kChildWrongOutcome = 10, kChildTooSlow = 11, kChildNullOpen = 12 };

// One rank of ProcessesAgreeDisagreeAndFailAlike: rounds agree, except that every 5th has one
// rank with another key (all must disagree) and every 11th one rank that refuses (all fail).
int agreeing_child(void* memory, int rank, int ranks) {
  static constexpr size_t kSizes[] = {8, RoundBoard::kInlineBytes, 4096, kSpillMax};
  RoundBoard b(memory, rank, ranks);
  for (int i = 0; i < 3000; ++i) {
    const auto gen = static_cast<uint32_t>(i);
    const size_t bytes = kSizes[i % 4];
    const bool refusal_round = i % 11 == 4;
    const bool odd_round = i % 5 == 2;
    if (refusal_round && (i / 11) % ranks == rank) {
      b.refuse(gen);
      continue;
    }
    const uint64_t variant = odd_round && (i / 5) % ranks == rank ? 9 : 0;
    std::string error;
    const auto start = Clock::now();
    const auto outcome =
        play(b, rank, ranks, gen, bytes, make_key(gen, bytes, variant), in(seconds(10)), &error);
    const std::string want = refusal_round ? "failed" : odd_round ? "disagreed" : "agreed";
    if (name_of(outcome) != want || !error.empty()) {
      std::fprintf(stderr, "child rank %d gen %u: %s, want %s %s\n", rank, gen,
                   name_of(outcome).c_str(), want.c_str(), error.c_str());
      return kChildWrongOutcome;
    }
    if (ms_since(start) > kPromptMs) return kChildTooSlow;
  }
  return kChildOk;
}

TEST_P(RanksTest, ProcessesAgreeDisagreeAndFailAlike) {
  const int ranks = GetParam();
  ProcessBoard shared(ranks);
  const auto status = run_children(
      ranks, seconds(60), [&](int rank) { return agreeing_child(shared.memory(), rank, ranks); });
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(status[static_cast<size_t>(r)], kChildOk) << "child rank " << r;
}

TEST_P(RanksTest, AbortInOneProcessWakesWaitersInOtherProcesses) {
  const int ranks = GetParam();
  const int parent_rank = ranks - 1;  // absent from the round: the children wait for it
  ProcessBoard shared(ranks);
  RoundBoard parent(shared.memory(), parent_rank, ranks);
  std::atomic<int>& waiting = shared.counter();
  Stamp& aborted_at = shared.stamp();
  const auto status = run_children(
      ranks - 1, seconds(30),
      [&](int rank) {
        RoundBoard b(shared.memory(), rank, ranks);
        std::byte* p = b.open(5, 64, in(seconds(30)));
        if (p == nullptr) return kChildNullOpen;
        fill_payload(p, 64, 5, rank);
        waiting.fetch_add(1);
        const RoundOutcome outcome = b.join(5, make_key(5, 64), in(seconds(30)));
        if (!happened(aborted_at)) return kChildWrongOutcome;  // returned before the abort
        if (ms_since(time_of(aborted_at)) > kPromptMs) return kChildTooSlow;
        if (outcome != RoundOutcome::kAborted) return kChildWrongOutcome;
        b.release();
        if (b.open(6, 64, in(seconds(30))) != nullptr) return kChildWrongOutcome;
        b.release();
        return kChildOk;
      },
      [&](const std::vector<pid_t>& children) {
        await(waiting, ranks - 1);
        await_asleep(children);  // single-threaded: each child's pid is its thread's id
        stamp_now(aborted_at);
        parent.abort();
      });
  for (int r = 0; r < ranks - 1; ++r)
    EXPECT_EQ(status[static_cast<size_t>(r)], kChildOk) << "child rank " << r;
  EXPECT_TRUE(parent.aborted());
}

}  // namespace
}  // namespace hvrun::detail::shm
