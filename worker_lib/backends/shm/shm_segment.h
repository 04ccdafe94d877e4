// One POSIX shared-memory segment per host and job: the ranks of a job that share a host map it
// and move tensor bytes through it (backends/shm/shm_backend.h).
//
// Life cycle (why nothing is left in /dev/shm):
//  1. Local rank 0 creates /dev/shm/<segment_name(job, host)> with O_EXCL (two jobs never share
//     one: the name carries the job id), reserves its pages (posix_fallocate: a full /dev/shm is
//     an error here, not a SIGBUS later), initialises the header, then publishes the name in the
//     job's key-value store.
//  2. Every other local rank waits for that key (bounded), maps the segment and checks that its
//     layout matches (same number of ranks, same slot size).
//  3. Each rank counts itself in (`attached`, a futex word) and waits until all local ranks did;
//     then every rank unlinks the name. From then on the segment lives only as long as the
//     mappings: any end of the job, SIGKILL included, frees it. Only a death between steps 1 and
//     3 can leave a file, which the launcher's orphan guard sweeps (segment_prefix(job)).
//
// Layout: a header (abort state), one cache line per rank with its barrier counter, the round
// board (round_board.h: the latency path's agreement without the coordinator), then, from the
// next page, kBufferSets sets of `ranks` slots of `slot_bytes` each (rotating buffers: see
// shm_backend.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "worker_lib/kv_store.h"

namespace hvrun::detail::shm {

// Bit 31 of every rank's barrier counter: the segment was aborted (the futex word changes, so a
// waiter about to sleep on it cannot miss the wake-up).
inline constexpr uint32_t kAbortBit = 0x80000000u;
inline constexpr uint32_t kCountMask = 0x7fffffffu;

// Buffer sets the slots rotate through (shm_backend.cc says why three).
inline constexpr int kBufferSets = 3;

struct alignas(64) RankLine {
  std::atomic<uint32_t> arrived;   // futex word: barriers this rank reached (low 31 bits)
  std::atomic<uint32_t> sleepers;  // threads sleeping on `arrived`; the poster wakes when > 0
  // One value per op a rank publishes (alltoallv's rounds), one per buffer set: a fast rank
  // publishing for its next op writes another set's entry than the one a slow rank still reads.
  std::atomic<uint64_t> meta[kBufferSets];
  std::atomic<int32_t> pid;
};

struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t ranks;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  std::atomic<uint32_t> attached;     // futex word: ranks that mapped the segment
  std::atomic<uint32_t> abort_state;  // 0 running, 1 being written, 2 reason readable
  int32_t abort_rank;
  char abort_reason[480];
  // RankLine lines[ranks] follow at lines_offset().
};

// "hvrun-shm-<job>-" : every segment of `job_id` starts with it (the orphan guard's sweep).
std::string segment_prefix(const std::string& job_id);
// "hvrun-shm-<job>-<host, sanitised>-<hash of host>" (a file name under /dev/shm).
std::string segment_name(const std::string& job_id, const std::string& host);

struct SegmentOptions {
  std::string job_id;
  std::string host;
  int local_rank = 0;
  int local_size = 1;
  size_t slot_bytes = 1 << 20;
  std::string kv_prefix = "shm";             // key-value store namespace of this host's group
  std::chrono::milliseconds timeout{30000};  // waiting for the other local ranks to attach
};

class Segment {
 public:
  // Creates (local rank 0) or opens the host's segment, waits until every local rank mapped it,
  // and unlinks its name. Errors name the segment, the host and what to check.
  static Result<std::unique_ptr<Segment>> attach(const SegmentOptions& options, KeyValueStore& kv);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  SegmentHeader& header() { return *static_cast<SegmentHeader*>(base_); }
  RankLine& line(int rank) { return lines_[rank]; }
  // RoundBoard::bytes_needed(ranks()) bytes, 64-byte aligned, formatted by the creator.
  std::byte* board() { return board_; }
  size_t slot_bytes() const { return slot_bytes_; }
  int ranks() const { return ranks_; }
  // Slot `rank` of buffer set `set` (0 .. kBufferSets-1); a set's slots are contiguous, so
  // slot(set, 0) .. + ranks * slot_bytes is one buffer too.
  std::byte* slot(int set, int rank) {
    return data_ + (static_cast<size_t>(set) * ranks_ + rank) * slot_bytes_;
  }
  const std::string& name() const { return name_; }

 private:
  Segment(void* base, size_t bytes, int ranks, size_t slot_bytes, std::string name);
  void* base_;
  size_t bytes_;
  int ranks_;
  size_t slot_bytes_;
  RankLine* lines_;
  std::byte* board_;
  std::byte* data_;
  std::string name_;
};

}  // namespace hvrun::detail::shm
