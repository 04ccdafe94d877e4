// Cross-host rounds: the round agreement (worker_lib/round_agreement.h) of a multi-host job, so
// that asynchronous submissions of cached tensors run without the coordinator across hosts too
// (agreement/cached_rounds.h). Two levels:
//   1. the host's ranks meet on their shm segment's round board (round_board.h), as a
//      single-host job's do; a host of one rank has no board and meets itself, and so does
//      every rank of a job on Gloo alone (each one its own "host" for the arbiter);
//   2. when the host's round agreed, its speaker (local rank 0) sends the key and the AND of its
//      ranks' bit vectors over TCP to the round arbiter (round_arbiter.h, on rank 0's process),
//      waits for the job's verdict and publishes it on the board; the host's other ranks wait
//      for it there. A host whose own round failed reports that (its speaker, when in the round)
//      or stays silent: either way the arbiter cannot agree without it.
// So every rank of every host decides as the arbiter did: the verdict is the only decision once
// a host agreed locally, and a host that did not agree locally is one the arbiter never counts
// as agreed. A refusal (this rank sends something to the coordinator) refuses the local round
// and, from the speaker, tells the arbiter, so the other hosts fall back at once.
//
// Only the AND of payloads crosses hosts: payloads() is null, so the blocking fast path
// (agreement/fast_path.h) uses these rounds for the agreement alone and moves every call's data
// through the data plane.
//
// Waits: the local round ends at the caller's deadline; the verdict of a round agreed locally
// is waited for without one (the arbiter always answers within its wait of the first report,
// or the job is aborting), bounded by the op timeout as a last resort.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "worker_lib/agreement/host_rounds/round_link.h"
#include "worker_lib/backends/shm/round_board.h"

namespace hvrun::detail::agreement {

class HostRounds final : public RoundAgreement {
 public:
  static constexpr size_t kCapacity = shm::RoundBoard::kVerdictBytes;

  // `board`: this host's ranks' board, or null for a host of one rank. `link`: the connection
  // to the arbiter, on the host's speaker only (null on the others).
  HostRounds(shm::RoundBoard* board, std::unique_ptr<RoundLink> link, int host,
             std::chrono::milliseconds op_timeout);
  ~HostRounds() override;
  HostRounds(const HostRounds&) = delete;
  HostRounds& operator=(const HostRounds&) = delete;

  size_t payload_capacity() const override { return kCapacity; }
  std::byte* open(uint32_t gen, size_t payload_bytes,
                  std::chrono::steady_clock::time_point deadline) override;
  RoundOutcome join(uint32_t gen, const RoundKey& key,
                    std::chrono::steady_clock::time_point deadline) override;
  void and_payloads(uint64_t* out, size_t words) const override;
  void release() override;
  void refuse(uint32_t gen) override;
  void leave() override;

  // Any thread: ends every wait here (the data plane aborts); later rounds fail.
  void abort();

 private:
  bool speaker() const { return link_ != nullptr; }
  // The speaker, after its host agreed on `gen`: asks the arbiter and waits for its verdict.
  RoundOutcome ask_arbiter(uint32_t gen, const RoundKey& key);
  void report_failed(uint32_t gen);

  shm::RoundBoard* board_;
  std::unique_ptr<RoundLink> link_;
  int host_;
  std::chrono::milliseconds op_timeout_;
  int wake_fd_ = -1;  // eventfd: abort()
  std::atomic<bool> aborted_{false};
  std::atomic<uint64_t> last_failed_report_{~0ull};  // refusals already told, by gen
  size_t held_bytes_ = 0;
  alignas(8) std::byte solo_[kCapacity] = {};   // a host of one rank: its payload
  alignas(8) std::byte result_[kCapacity] = {};  // the job's AND after kAgreed
};

}  // namespace hvrun::detail::agreement
