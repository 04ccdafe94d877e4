// The round board: how the ranks of a single-host job agree, without the coordinator, that they
// all run the same small collective next (the RoundAgreement of
// worker_lib/round_agreement.h, used by the worker's fast path). It lives in the
// job's shared-memory segment (shm_segment.h).
//
// A round is numbered by a generation `gen`: the count of events (plans executed plus fast
// collectives run) a rank has seen. Ranks with nothing in flight have seen the same events, so
// they look for the same gen. In a round every rank publishes a key (which tensor, which
// metadata, which event count) and its contribution, then arrives; once all arrived, every rank
// reads every key and payload and decides alike: agreed iff all keys are equal.
//
// Consensus, per rank: each rank has one state word per ring slot (round g uses slot
// g % kSlots). For round g it ends as either {g, arrived} (the rank's own CAS) or {g, refused}
// (a CAS by a peer that stopped waiting for it, at its deadline or because the rank said it will
// not come, refuse()); whichever CAS comes first stands. The round is complete iff every rank's
// word says arrived, failed iff one says refused, so every rank decides alike. Each rank writes
// only its own lines in the common case, so a round moves about as many cache lines between
// cores as one shm barrier.
//
// Reuse: a slot's lines are rewritten for a later round only once every rank that arrived in
// its earlier round is done reading it: known at once when the previous gen's round completed
// (every rank arrived there, so each finished the older round first), else checked through each
// rank's `done` word.
//
// Relay (multi-host jobs, host_rounds.h): once a round agreed on the board, one rank of the host
// asks the other hosts and publishes the job's verdict in the round's slot; the others wait for
// it (publish_verdict / await_verdict), so the host's ranks decide as the job does.
//
// Waits spin briefly, then yield, then sleep on the board's futex bell; every wait ends at the
// caller's deadline or when the board is aborted (the shm backend's abort: a rank died, the job
// aborted).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "worker_lib/round_agreement.h"

namespace hvrun::detail::shm {

using detail::round_outcome_name;
using detail::RoundKey;
using detail::RoundOutcome;

class RoundBoard final : public RoundAgreement, public RoundPayloads {
 public:
  static constexpr int kSlots = 4;
  // Payload per rank and round: a collective this small travels inside the round. Up to
  // kInlineBytes it shares the cache line of the rank's state and key.
  static constexpr size_t kPayloadBytes = 16 << 10;
  static constexpr size_t kInlineBytes = 16;
  // Bytes a relayed verdict carries (the AND of a cached round's bit vectors).
  static constexpr size_t kVerdictBytes = 512;

  // Bytes of segment memory a board for `ranks` ranks needs (a multiple of 64).
  static size_t bytes_needed(int ranks);
  // Formats the memory (the segment's creator, before any other rank maps it).
  static void initialise(void* memory, int ranks);

  // `memory`: bytes_needed(ranks) bytes of the mapped segment, 64-byte aligned.
  RoundBoard(void* memory, int rank, int ranks);
  RoundBoard(const RoundBoard&) = delete;
  RoundBoard& operator=(const RoundBoard&) = delete;

  // Step 1 (one thread of this rank at a time, through step 3): waits until round `gen` may
  // start here (its slot's earlier round read by everyone). Returns this rank's payload area
  // for `gen` (payload_bytes <= kPayloadBytes), to fill before join(), or null when this rank
  // was refused already, the round is superseded, the board aborted, or the slot did not free
  // up by `deadline` (take the coordinator path; call release()).
  std::byte* open(uint32_t gen, size_t payload_bytes,
                  std::chrono::steady_clock::time_point deadline) override;
  // Step 2: publishes `key`, arrives and waits until every rank arrived or one was refused; at
  // `deadline` refuses the ranks still missing. Call after open() returned non-null.
  RoundOutcome join(uint32_t gen, const RoundKey& key,
                    std::chrono::steady_clock::time_point deadline) override;
  // After kAgreed: rank k's payload of the round (valid until release()).
  const std::byte* payload(int k) const override;
  RoundPayloads* payloads() override { return this; }
  // After kAgreed: the payloads reduced with the shm backend's kernels (reduce_kernels.h), in
  // the same order as its latency path, so the bits equal the coordinator path's.
  void reduce_payloads(void* output, size_t count, DataType dtype, ReduceOp op, int divisor,
                       double postscale) override;
  void and_payloads(uint64_t* out, size_t words) const override;
  size_t payload_capacity() const override { return kPayloadBytes; }
  // Step 3: this rank is done with round `gen`'s lines. Call after every open() before the
  // next one.
  void release() override;

  // Any thread, any time: this rank will not take part in round `gen` (it sent a collective to
  // the coordinator, or shuts down); peers waiting in it refuse it at once. One store.
  void refuse(uint32_t gen) override;
  // Any thread: this rank takes part in no round from now on (it shuts down); peers waiting in
  // one refuse it at once.
  void leave() override;
  // Relay, between join() returning kAgreed and release(): one rank of the host publishes the
  // job's verdict on round `gen` (and `bytes` <= kVerdictBytes of data), and wakes the others.
  void publish_verdict(uint32_t gen, RoundOutcome outcome, const void* data, size_t bytes);
  // The other ranks, at the same point: waits for `gen`'s verdict until `deadline` or an abort
  // (then kAborted); the verdict's data is readable through verdict_data() until release().
  RoundOutcome await_verdict(uint32_t gen, std::chrono::steady_clock::time_point deadline);
  const std::byte* verdict_data() const;

  // Any thread: fails every round in progress and every later one, on every rank of the host.
  void abort();
  bool aborted() const;

  struct alignas(64) Line;  // public for the layout's static checks
  struct alignas(64) Verdict;

 private:
  struct alignas(64) Shared;
  struct alignas(64) RankWord;
  Verdict& verdict(uint32_t gen) const;
  Line& line(uint32_t gen, int rank) const;
  std::byte* spill(uint32_t gen, int rank) const;  // payloads over kInlineBytes
  void ring();
  // Whether every rank that arrived in the earlier round of `gen`'s slot is done with it.
  bool slot_free_for(uint32_t gen) const;
  // Waits until `done()` or the deadline / abort; false on deadline or abort.
  template <typename Done>
  bool wait(Done done, std::chrono::steady_clock::time_point deadline);

  std::byte* base_;
  int rank_;
  int ranks_;
  Shared* shared_;
  RankWord* refusals_;  // per rank: the latest gen it refused
  RankWord* done_;      // per rank: the latest gen it released
  std::byte* lines_;
  std::byte* spills_;
  std::byte* verdicts_;
  // This thread's round in progress (between open() and release()).
  uint32_t held_gen_ = 0;
  bool holding_ = false;
  bool held_inline_ = true;
  // The latest round this rank saw complete (every rank arrived): the next gen may reuse its
  // slot without checking `done_`.
  uint32_t last_complete_ = 0;
  bool have_complete_ = false;
  std::vector<const void*> sources_;  // reduce_payloads(): every rank's payload
};

}  // namespace hvrun::detail::shm
