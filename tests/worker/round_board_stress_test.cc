// The round board under random interleavings: every rank acts at random per round (join, join
// late, join with another key, refuse, refuse late, skip); every rank that saw an outcome saw the
// same one, and agreed payloads are exact. The sleeps are the lateness under test, not ordering.
#include "tests/worker/round_board_harness.h"

#include <random>

namespace hvrun::detail::shm {
namespace {

using namespace board_test;  // NOLINT(google-build-using-namespace): the tests' shared harness

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

}  // namespace
}  // namespace hvrun::detail::shm
