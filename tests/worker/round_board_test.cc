// The shared-memory round board (worker_lib/backends/shm/round_board.h), alone: threads act as
// ranks, one RoundBoard per rank over one formatted block of memory (the randomised stress test is
// round_board_stress_test.cc, forked processes round_board_process_test.cc). What is checked, per
// round (gen):
//  - safety: every rank that got an outcome got the same class (agreed / disagreed / not), and an
//    agreed round's payload(k) holds exactly what rank k wrote for that gen (no torn or stale
//    bytes, also when read again after a delay, while faster peers race ahead to reuse the slot);
//  - liveness: refusals and aborts end peers' waits at once, an absent rank at the deadline, and
//    no call outlives its deadline by much.
// A step that must find peers asleep in the board's futex wait (to check that it wakes them)
// waits until the kernel says they are (tests/support/futex_sleep.h), never for a sleep to be
// long enough. The randomised stress test's sleeps are lateness under test, not ordering; every
// wait is bounded.
#include "tests/worker/round_board_harness.h"

#include <tuple>

namespace hvrun::detail::shm {
namespace {

using namespace board_test;  // NOLINT(google-build-using-namespace): the tests' shared harness

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

}  // namespace
}  // namespace hvrun::detail::shm
