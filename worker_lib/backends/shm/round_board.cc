#include "worker_lib/backends/shm/round_board.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "worker_lib/backends/shm/futex.h"
#include "worker_lib/backends/shm/reduce_kernels.h"

namespace hvrun::detail::shm {
namespace {

// A rank's state word for one slot: gen (bits 32-63) | status (0-31).
constexpr uint32_t kNone = 0;  // not decided for the word's gen (its slot's first rounds)
constexpr uint32_t kArrived = 1;
constexpr uint32_t kRefused = 2;

uint64_t state_word(uint32_t gen, uint32_t status) {
  return (static_cast<uint64_t>(gen) << 32) | status;
}
uint32_t gen_of(uint64_t w) { return static_cast<uint32_t>(w >> 32); }
uint32_t status_of(uint64_t w) { return static_cast<uint32_t>(w); }
// > 0: gen a is newer than gen b (wrapping: ranks are never 2^31 events apart).
int32_t newer(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }

// The same waiting shape as the shm backend's barriers (shm_backend.cc says why): a short spin
// (a peer on its own core arrives within it), then polls with sched_yield() (a late peer that
// needs this core gets it, and this vCPU does not halt), then sleeping on the board's bell.
constexpr int kSpinPolls = 1000;
constexpr std::chrono::microseconds kYieldSpin{500};
constexpr std::chrono::milliseconds kMaxSleep{1000};

constexpr uint32_t kNoGen = 0xffffffffu;

}  // namespace

// One rank's state, key and small payload for one slot: a peer polling the state gets the rest
// in the same cache line.
struct alignas(64) RoundBoard::Line {
  std::atomic<uint64_t> state;
  RoundKey key;
  std::byte inline_payload[kInlineBytes];
};
static_assert(sizeof(RoundBoard::Line) == 64);

struct alignas(64) RoundBoard::Shared {
  std::atomic<uint32_t> aborted;
  std::atomic<uint32_t> bell;      // futex word: bumped by a change a sleeper may wait for
  std::atomic<uint32_t> sleepers;  // threads asleep on `bell` (rare: after a long wait)
};

// A slot's relayed verdict: gen (bits 32-63) | outcome + 1 (0-31; 0: none yet), then its data.
struct alignas(64) RoundBoard::Verdict {
  std::atomic<uint64_t> word;
  std::byte data[kVerdictBytes];
};
static_assert(sizeof(RoundBoard::Verdict) == 64 + RoundBoard::kVerdictBytes);

struct alignas(64) RoundBoard::RankWord {
  std::atomic<uint32_t> gen;
  std::atomic<uint32_t> gone;  // refusals_ only: leave() was called
};

namespace {
size_t refusals_offset() { return 64; }
size_t done_offset(int ranks) { return refusals_offset() + 64 * static_cast<size_t>(ranks); }
size_t lines_offset(int ranks) { return done_offset(ranks) + 64 * static_cast<size_t>(ranks); }
size_t spills_offset(int ranks) {
  return lines_offset(ranks) + 64 * static_cast<size_t>(RoundBoard::kSlots) * ranks;
}
size_t verdicts_offset(int ranks) {
  return spills_offset(ranks) +
         static_cast<size_t>(RoundBoard::kSlots) * static_cast<size_t>(ranks) *
             RoundBoard::kPayloadBytes;
}
}  // namespace

size_t RoundBoard::bytes_needed(int ranks) {
  return verdicts_offset(ranks) + static_cast<size_t>(kSlots) * sizeof(Verdict);
}

void RoundBoard::initialise(void* memory, int ranks) {
  auto* base = static_cast<std::byte*>(memory);
  auto* shared = new (base) Shared;
  shared->aborted.store(0);
  shared->bell.store(0);
  shared->sleepers.store(0);
  for (int r = 0; r < ranks; ++r) {
    new (base + refusals_offset() + 64 * static_cast<size_t>(r)) RankWord{kNoGen, 0};
    new (base + done_offset(ranks) + 64 * static_cast<size_t>(r)) RankWord{kNoGen, 0};
  }
  for (int i = 0; i < kSlots; ++i)
    for (int r = 0; r < ranks; ++r) {
      // Slot i's words start undecided for the gen before its first round (i).
      auto* l = new (base + lines_offset(ranks) + 64 * (static_cast<size_t>(i) * ranks + r)) Line;
      l->state.store(state_word(static_cast<uint32_t>(i - kSlots), kNone));
      l->key = RoundKey{};
    }
  for (int i = 0; i < kSlots; ++i) {
    auto* v = new (base + verdicts_offset(ranks) + sizeof(Verdict) * static_cast<size_t>(i))
        Verdict;
    v->word.store(state_word(static_cast<uint32_t>(i - kSlots), 0));
  }
}

RoundBoard::RoundBoard(void* memory, int rank, int ranks)
    : base_(static_cast<std::byte*>(memory)),
      rank_(rank),
      ranks_(ranks),
      shared_(reinterpret_cast<Shared*>(base_)),
      refusals_(reinterpret_cast<RankWord*>(base_ + refusals_offset())),
      done_(reinterpret_cast<RankWord*>(base_ + done_offset(ranks))),
      lines_(base_ + lines_offset(ranks)),
      spills_(base_ + spills_offset(ranks)),
      verdicts_(base_ + verdicts_offset(ranks)),
      sources_(static_cast<size_t>(ranks)) {}

RoundBoard::Line& RoundBoard::line(uint32_t gen, int rank) const {
  const size_t index = static_cast<size_t>(gen % kSlots) * static_cast<size_t>(ranks_) +
                       static_cast<size_t>(rank);
  return *reinterpret_cast<Line*>(lines_ + 64 * index);
}

std::byte* RoundBoard::spill(uint32_t gen, int rank) const {
  const size_t index = static_cast<size_t>(gen % kSlots) * static_cast<size_t>(ranks_) +
                       static_cast<size_t>(rank);
  return spills_ + kPayloadBytes * index;
}

RoundBoard::Verdict& RoundBoard::verdict(uint32_t gen) const {
  return *reinterpret_cast<Verdict*>(verdicts_ + sizeof(Verdict) * (gen % kSlots));
}

bool RoundBoard::aborted() const {
  return shared_->aborted.load(std::memory_order_acquire) != 0;
}

void RoundBoard::ring() {
  // Every change a waiter looks for is a seq_cst write before this call, and a sleeper counts
  // itself (seq_cst) before it reads the bell and looks again: seeing no sleeper here means a
  // later sleeper sees the change. So the bell is bumped only when someone may be asleep.
  if (shared_->sleepers.load() == 0) return;
  shared_->bell.fetch_add(1);
  futex_wake_all(&shared_->bell);
}

template <typename Done>
bool RoundBoard::wait(Done done, std::chrono::steady_clock::time_point deadline) {
  for (int i = 0; i < kSpinPolls; ++i) {
    if (done()) return true;
    if (aborted()) return false;
    cpu_relax();
  }
  // The clock is read after every yield: on a loaded host one sched_yield() can last a time
  // slice of every other runnable thread, and a round's deadline is a few milliseconds (polling
  // the clock only every few dozen yields let a rank overshoot it by hundreds).
  const auto yield_until = std::min(deadline, std::chrono::steady_clock::now() + kYieldSpin);
  while (std::chrono::steady_clock::now() < yield_until) {
    if (done()) return true;
    if (aborted()) return false;
    sched_yield();
  }
  while (true) {
    shared_->sleepers.fetch_add(1);
    const uint32_t bell = shared_->bell.load();
    if (done()) {
      shared_->sleepers.fetch_sub(1);
      return true;
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    if (aborted() || left <= std::chrono::nanoseconds::zero()) {
      shared_->sleepers.fetch_sub(1);
      return false;
    }
    futex_wait(&shared_->bell, bell, std::min<std::chrono::nanoseconds>(left, kMaxSleep));
    shared_->sleepers.fetch_sub(1);
  }
}

bool RoundBoard::slot_free_for(uint32_t gen) const {
  for (int k = 0; k < ranks_; ++k) {
    const uint64_t s = line(gen, k).state.load(std::memory_order_acquire);
    if (status_of(s) != kArrived || newer(gen, gen_of(s)) <= 0) continue;  // no older reader
    // Rank k arrived in the slot's earlier round: it reads the others' lines until its release.
    if (newer(gen_of(s), done_[k].gen.load(std::memory_order_acquire)) > 0) return false;
  }
  return true;
}

std::byte* RoundBoard::open(uint32_t gen, size_t payload_bytes,
                            std::chrono::steady_clock::time_point deadline) {
  holding_ = true;
  held_gen_ = gen;
  held_inline_ = payload_bytes <= kInlineBytes;
  if (aborted() || payload_bytes > kPayloadBytes) {
    refuse(gen);
    return nullptr;
  }
  // Every rank arrived in gen - 1, after finishing the older round of this slot: no check.
  const bool chained = have_complete_ && gen == last_complete_ + 1;
  if (!chained && !wait([&] { return slot_free_for(gen); }, deadline)) {
    refuse(gen);  // peers waiting in this round need not wait for this rank's deadline too
    return nullptr;
  }
  const uint64_t s = line(gen, rank_).state.load(std::memory_order_acquire);
  if (newer(gen_of(s), gen) >= 0) return nullptr;  // a peer refused this rank already
  return held_inline_ ? line(gen, rank_).inline_payload : spill(gen, rank_);
}

RoundOutcome RoundBoard::join(uint32_t gen, const RoundKey& key,
                              std::chrono::steady_clock::time_point deadline) {
  Line& mine = line(gen, rank_);
  mine.key = key;
  uint64_t s = mine.state.load(std::memory_order_relaxed);
  do {
    if (newer(gen_of(s), gen) >= 0) return RoundOutcome::kFailed;  // refused: never arrived
  } while (!mine.state.compare_exchange_weak(s, state_word(gen, kArrived)));  // publishes all
  ring();

  // Settled when every peer's word for `gen` is decided; `failed` when one was refused.
  bool failed = false;
  auto settled = [&] {
    bool pending = false;
    for (int k = 0; k < ranks_ && !failed; ++k) {
      if (k == rank_) continue;
      std::atomic<uint64_t>& word = line(gen, k).state;
      uint64_t v = word.load(std::memory_order_acquire);
      while (true) {
        if (newer(gen_of(v), gen) > 0 || (gen_of(v) == gen && status_of(v) == kRefused)) {
          failed = true;  // refused, or superseded (it can only move on once this round failed)
          break;
        }
        if (gen_of(v) == gen) break;  // arrived
        // Not here yet: refuse it now if it said it will not come.
        if (refusals_[k].gen.load(std::memory_order_acquire) != gen &&
            refusals_[k].gone.load(std::memory_order_acquire) == 0) {
          pending = true;
          break;
        }
        if (word.compare_exchange_strong(v, state_word(gen, kRefused))) {
          ring();
          failed = true;
          break;
        }  // else v reloaded: it arrived meanwhile, or another peer refused it
      }
    }
    return failed || !pending;
  };
  if (!wait(settled, deadline)) {
    // Deadline or abort: refuse every peer still missing; each CAS refuses it or finds it
    // arrived. An abort too goes through the words, so a rank arriving after it cannot decide
    // the round differently from those it woke.
    for (int k = 0; k < ranks_; ++k) {
      if (k == rank_) continue;
      std::atomic<uint64_t>& word = line(gen, k).state;
      uint64_t v = word.load();
      while (newer(gen_of(v), gen) < 0 &&
             !word.compare_exchange_strong(v, state_word(gen, kRefused))) {
      }
    }
    ring();
    settled();
  }
  // Decided from the state words alone, which every rank reads alike (an abort seen by one
  // rank a moment later than another must not split them).
  if (failed) return aborted() ? RoundOutcome::kAborted : RoundOutcome::kFailed;
  have_complete_ = true;
  last_complete_ = gen;
  for (int k = 0; k < ranks_; ++k)
    if (!(line(gen, k).key == key)) return RoundOutcome::kDisagreed;
  return RoundOutcome::kAgreed;
}

const std::byte* RoundBoard::payload(int k) const {
  return held_inline_ ? line(held_gen_, k).inline_payload : spill(held_gen_, k);
}

void RoundBoard::reduce_payloads(void* output, size_t count, DataType dtype, ReduceOp op,
                                 int divisor, double postscale) {
  for (int k = 0; k < ranks_; ++k) sources_[static_cast<size_t>(k)] = payload(k);
  reduce_sources_finished(output, nullptr, sources_.data(), ranks_, count, dtype, op, divisor,
                          postscale);
}

void RoundBoard::and_payloads(uint64_t* out, size_t words) const {
  std::memcpy(out, payload(0), words * sizeof(uint64_t));
  for (int k = 1; k < ranks_; ++k) {
    const std::byte* theirs = payload(k);
    for (size_t w = 0; w < words; ++w) {
      uint64_t v;
      std::memcpy(&v, theirs + w * sizeof v, sizeof v);
      out[w] &= v;
    }
  }
}

// The slot's verdict lines are rewritten for a later gen only once every rank released this
// one (the slot reuse rule above): readers see this gen's until their release().
void RoundBoard::publish_verdict(uint32_t gen, RoundOutcome outcome, const void* data,
                                 size_t bytes) {
  Verdict& v = verdict(gen);
  if (bytes > 0) std::memcpy(v.data, data, std::min(bytes, kVerdictBytes));
  v.word.store(state_word(gen, static_cast<uint32_t>(outcome) + 1));  // seq_cst: see ring()
  ring();
}

RoundOutcome RoundBoard::await_verdict(uint32_t gen,
                                       std::chrono::steady_clock::time_point deadline) {
  const Verdict& v = verdict(gen);
  uint64_t w = 0;
  const bool got = wait(
      [&] {
        w = v.word.load(std::memory_order_acquire);
        return gen_of(w) == gen && status_of(w) != 0;
      },
      deadline);
  if (!got) return RoundOutcome::kAborted;
  return static_cast<RoundOutcome>(status_of(w) - 1);
}

const std::byte* RoundBoard::verdict_data() const { return verdict(held_gen_).data; }

void RoundBoard::release() {
  if (!holding_) return;
  holding_ = false;
  done_[rank_].gen.store(held_gen_);  // seq_cst: ring() relies on it (see there)
  ring();  // a peer may wait for this slot to free up
}

void RoundBoard::refuse(uint32_t gen) {
  refusals_[rank_].gen.store(gen);
  ring();
}

void RoundBoard::leave() {
  refusals_[rank_].gone.store(1);
  ring();
}

void RoundBoard::abort() {
  shared_->aborted.store(1);
  shared_->bell.fetch_add(1);
  futex_wake_all(&shared_->bell);
}

}  // namespace hvrun::detail::shm
