// What the round board's tests share (round_board_test.cc, round_board_stress_test.cc,
// round_board_process_test.cc): a board on threads, a bounded runner for one thread per rank,
// payloads that show a torn or stale read, and the clock stamps that measure how promptly a step
// woke its peers. Every wait here is bounded.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/futex_sleep.h"
#include "worker_lib/backends/shm/round_board.h"

namespace hvrun::detail::shm::board_test {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

inline constexpr size_t kSpillMax = RoundBoard::kPayloadBytes;

// "At once": well under the board's longest futex sleep (1 s), so a missed wake-up shows, and
// far above scheduling delays on a busy 2-core machine.
inline constexpr double kPromptMs = 500;

inline Clock::time_point in(Clock::duration d) { return Clock::now() + d; }

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Orders test steps across ranks (never the board's waits): until count >= n, 20 s at most.
inline void await(const std::atomic<int>& count, int n) {
  const auto until = in(seconds(20));
  while (count.load() < n && Clock::now() < until) std::this_thread::yield();
}

// When a step happened, for peers on other threads (or processes: the clock is the system's
// monotonic one) to measure how promptly it woke them: 0 until it has.
using Stamp = std::atomic<Clock::rep>;
inline void stamp_now(Stamp& stamp) { stamp = Clock::now().time_since_epoch().count(); }
inline Clock::time_point time_of(const Stamp& stamp) {
  return Clock::time_point{Clock::duration(stamp.load())};
}
inline bool happened(const Stamp& stamp) { return stamp.load() != 0; }

// Until every thread of `tids` sleeps in futex(2) (peers waiting in the board), 20 s at most.
inline void await_asleep(const std::vector<pid_t>& tids) {
  EXPECT_TRUE(test::wait_until_asleep_in_futex(tids, seconds(20)))
      << "peers never went to sleep in the board's futex wait";
}

// The thread ids of every rank but `except`, once each has written its own into `tids`.
inline std::vector<pid_t> all_but(const std::vector<pid_t>& tids, int except) {
  std::vector<pid_t> out;
  for (size_t r = 0; r < tids.size(); ++r)
    if (static_cast<int>(r) != except) out.push_back(tids[r]);
  return out;
}

// Every 8 bytes of rank r's payload for gen g are distinct from any other (g, r)'s, so a torn
// or stale payload never passes for the right one.
inline uint64_t payload_word(uint32_t gen, int rank, size_t index) {
  return (static_cast<uint64_t>(gen) << 32) ^ (static_cast<uint64_t>(rank) << 24) ^
         (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull) ^ 0x00A5C3E1ull;
}

inline void fill_payload(std::byte* p, size_t bytes, uint32_t gen, int rank) {
  for (size_t off = 0; off < bytes; off += 8) {
    const uint64_t w = payload_word(gen, rank, off / 8);
    std::memcpy(p + off, &w, std::min<size_t>(8, bytes - off));
  }
}

// Empty when `p` holds what `rank` wrote for `gen`; else where and what differs.
inline std::string payload_error(const std::byte* p, size_t bytes, uint32_t gen, int rank) {
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
inline RoundKey make_key(uint32_t gen, size_t bytes, uint64_t variant = 0) {
  return RoundKey{{gen, bytes, variant, 0xfeedull, 42}};
}

// Empty when every rank's payload is right for an agreed round.
inline std::string check_payloads(const RoundBoard& board, int ranks, size_t bytes, uint32_t gen) {
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
inline void run_ranks(ThreadBoard& board, seconds limit, const std::function<void(int)>& body) {
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
inline std::optional<RoundOutcome> play(RoundBoard& board, int rank, int ranks, uint32_t gen,
                                        size_t bytes, const RoundKey& key,
                                        Clock::time_point deadline, std::string* error) {
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

inline std::string name_of(std::optional<RoundOutcome> o) {
  return o ? round_outcome_name(*o) : "null";
}

// The round did not happen here: open() was null (refused already) or join() failed.
inline bool not_agreed(std::optional<RoundOutcome> o) { return !o || *o == RoundOutcome::kFailed; }

// Ranks on threads (round_board_test.cc) and on processes (round_board_process_test.cc), for 2,
// 3 and 4 ranks.
class RanksTest : public testing::TestWithParam<int> {};

}  // namespace hvrun::detail::shm::board_test
