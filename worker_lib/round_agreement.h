// How the ranks of a job agree among themselves, without the coordinator, that they all run the
// same small collective next, and exchange its data in the same step (the worker's fast path,
// agreement/fast_path.h, agreement/cached_rounds.h). Implementations: backends/shm/round_board.h,
// in a single-host job's shared-memory segment (its memory, futex bell and reduce kernels are the
// segment's); agreement/host_rounds/host_rounds.h, a board per host joined across hosts by an arbiter
// (multi-host jobs: only the AND of the ranks' payloads crosses hosts). docs/design/
// steady-state.md tells the whole steady state.
//
// A round is numbered by a generation `gen` that every idle rank computes alike (the count of
// plans executed plus fast collectives run). In a round every rank publishes a key and its
// contribution, then arrives; once all arrived, every rank decides alike: agreed iff all keys
// are equal. A rank that stops waiting refuses the ranks still missing, and a rank that will not
// come can refuse itself, so every rank sees the same outcome. Every wait ends at the caller's
// deadline or when the data plane is aborted.
//
// Threads: one thread of a rank at a time through open() ... release(); refuse() and leave()
// from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hvrun/types.h"

namespace hvrun::detail {

// What ranks compare: all words equal = the same collective.
struct RoundKey {
  uint64_t words[5] = {};
  bool operator==(const RoundKey& other) const {
    return std::memcmp(words, other.words, sizeof words) == 0;
  }
};

enum class RoundOutcome {
  kAgreed,     // every rank arrived with the same key: run it; payloads readable until release()
  kDisagreed,  // every rank arrived, keys differ: everyone takes the coordinator path
  kFailed,     // a rank was refused (deadline, it refused) or the round was superseded
  kAborted,    // the agreement was aborted
};

inline const char* round_outcome_name(RoundOutcome outcome) {
  switch (outcome) {
    case RoundOutcome::kAgreed: return "agreed";
    case RoundOutcome::kDisagreed: return "disagreed";
    case RoundOutcome::kFailed: return "failed";
    case RoundOutcome::kAborted: return "aborted";
  }
  return "?";
}

class RoundPayloads;

class RoundAgreement {
 public:
  virtual ~RoundAgreement() = default;

  // Bytes per rank a round carries at most.
  virtual size_t payload_capacity() const = 0;
  // Step 1: waits until round `gen` may start here. Returns this rank's payload area for `gen`
  // (payload_bytes <= payload_capacity()), to fill before join(), or null when this rank was
  // refused already, the round is superseded, the agreement aborted, or the round could not
  // start by `deadline` (take the coordinator path; call release()).
  virtual std::byte* open(uint32_t gen, size_t payload_bytes,
                          std::chrono::steady_clock::time_point deadline) = 0;
  // Step 2: publishes `key`, arrives and waits until every rank arrived or one was refused; at
  // `deadline` refuses the ranks still missing. Call after open() returned non-null.
  virtual RoundOutcome join(uint32_t gen, const RoundKey& key,
                            std::chrono::steady_clock::time_point deadline) = 0;
  // After kAgreed, before release(): the bitwise AND over every rank of its payload's first
  // `words` 64-bit words, into `out`.
  virtual void and_payloads(uint64_t* out, size_t words) const = 0;
  // Step 3: this rank is done with round `gen`. Call after every open() before the next one.
  virtual void release() = 0;

  // This rank will not take part in round `gen` (it sent a collective to the coordinator);
  // peers waiting in it refuse it at once.
  virtual void refuse(uint32_t gen) = 0;
  // This rank takes part in no round from now on (it shuts down).
  virtual void leave() = 0;

  // Every rank's payload of an agreed round (what the blocking fast path reduces), or null
  // where only and_payloads() crosses (the cross-host rounds).
  virtual RoundPayloads* payloads() { return nullptr; }
};

// Every rank's payload of an agreed round, where an agreement carries them (one host's board).
class RoundPayloads {
 public:
  virtual ~RoundPayloads() = default;
  // After kAgreed, before release(): rank k's payload of the round, as it filled it.
  virtual const std::byte* payload(int k) const = 0;
  // After kAgreed, before release(): every rank's payload (`count` elements of `dtype`'s work
  // type, as reduction/reduction_math.h packs them) reduced in rank order with `op`, divided by
  // `divisor` (when > 1) and times `postscale`, written to `output` as `dtype`. Every rank
  // computes the same bits.
  virtual void reduce_payloads(void* output, size_t count, DataType dtype, ReduceOp op,
                               int divisor, double postscale) = 0;
};

}  // namespace hvrun::detail
