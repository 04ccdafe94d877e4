#include "worker_lib/backends/shm/shm_backend.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <numeric>
#include <vector>

#include "worker_lib/backends/shm/futex.h"
#include "worker_lib/backends/shm/piece_layout.h"
#include "worker_lib/backends/shm/reduce_kernels.h"
#include "worker_lib/backends/shm/round_board.h"
#include "worker_lib/backends/shm/shm_segment.h"
#include "worker_lib/reduction/reduction_math.h"

namespace hvrun::detail {
namespace {

using shm::kAbortBit;
using shm::kCountMask;

// Buffers up to this size take the one-barrier path: each rank reduces all of it itself.
constexpr size_t kLatencyPathBytes = 16 << 10;
// Polls of a peer's counter before sleeping on it (one poll is ~20 ns, so ~20 us). When both
// ranks hold a core, a peer arrives within the spin (a 4-byte allreduce takes ~0.8 us); on an
// oversubscribed machine, 5-20x longer spins helped the smallest allreduces little or not at
// all but cut the large-buffer bandwidth and a ResNet-50 step by 30-70%, because spinners take
// the core their peer needs (bench/RESULTS.md, section 6). Sleeping costs a futex wake-up
// (~30 us).
constexpr int kSpinPolls = 1000;
// After the spin, polls with sched_yield() in between for this long before sleeping (checking
// the clock every kYieldPolls polls): on a loaded machine a yielding waiter gives its peer the
// core yet sees it arrive without a wake-up. Anything from 200 us to 1000 us ran a fused
// ResNet-50 step 6-8% faster than sleeping right after the spin (hvrun_shm_raw_bench, the
// variants taking turns in one run).
constexpr std::chrono::microseconds kYieldSpin{500};
constexpr int kYieldPolls = 50;
// A sleeping waiter re-checks at least this often (the wake-ups make this a backstop only).
constexpr std::chrono::milliseconds kMaxSleep{1000};
// How long a rank that meets a teardown waits for the peer to finish writing its reason.
constexpr std::chrono::milliseconds kReasonWait{100};
constexpr size_t kAlign = 64;  // sub-slices start on cache lines
// allreduce_pieces: pieces of at least kPieceAlignFromBytes start kPieceStartInPageBytes into a
// kPieceAlignBytes page of the slots (the gap costs at most 4 KiB of slot space per such piece).
// Mid-page, not at its start: allocators hand out large buffers a few bytes into a page
// (glibc's malloc 16, posix_memalign(64) and torch 64), and when a tensor's bytes sit within
// ~32 bytes of the slot bytes they meet, modulo 4 KiB, the loads of the reduction and of the
// copies wait on earlier stores to the other buffer (the low 12 address bits match: 4K
// aliasing). ResNet-50's step from malloc'd tensors ran at 0.68-0.72x the packed buffer with
// page-aligned starts, 0.95x with this one (hvrun_gradient_bench, 2-vCPU EPYC).
constexpr size_t kPieceAlignBytes = 4096;
constexpr size_t kPieceStartInPageBytes = 2048;
constexpr size_t kPieceAlignFromBytes = 64 << 10;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

// Rotating buffers: round i (a barrier and the copies around it) uses set i % kBufferSets. An
// op's round writes its set, passes the barrier, then reads; a rank writes set s again (round
// i+3) only after every rank reached round i+2's barrier, which each reaches only after reading
// everything of round i. allreduce_pieces pipelines its chunks over the same rounds with one
// barrier per chunk, which needs the third set (see there).
class ShmBackend final : public Backend {
 public:
  ShmBackend(std::unique_ptr<shm::Segment> segment, const ShmBackendOptions& options)
      : segment_(std::move(segment)),
        rank_(options.rank),
        size_(options.size),
        host_(options.host),
        timeout_(options.timeout),
        sources_(static_cast<size_t>(options.size)) {
    if (segment_)
      board_ = std::make_unique<shm::RoundBoard>(segment_->board(), rank_, size_);
  }

  std::string name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    HVRUN_RETURN_IF_ERROR(aborted_status());
    if (count == 0 || size_ == 1) return Status::ok();
    const size_t esize = dtype_size(dtype);
    auto* data = static_cast<std::byte*>(buffer);
    const size_t bytes = count * esize;
    const auto deadline = start("allreduce");
    if (bytes <= kLatencyPathBytes && bytes <= segment_->slot_bytes()) {
      const int set = next_set();
      std::memcpy(segment_->slot(set, rank_), data, bytes);
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      for (int k = 0; k < size_; ++k) sources_[k] = segment_->slot(set, k);
      shm::reduce_sources(data, sources_.data(), size_, count, dtype, op);
      return Status::ok();
    }
    if (work_dtype(dtype) == dtype) {
      // Native types: the pipelined chunk loop of allreduce_pieces (one barrier per chunk, the
      // two-source reduction in one pass), with the buffer as its one piece.
      const ReducePiece whole{buffer, buffer, count};
      std::vector<std::byte> unused;
      return allreduce_pieces(std::span<const ReducePiece>(&whole, 1), dtype, op, ReduceScaling{},
                              unused, nullptr);
    }
    // float16/bfloat16 travel as themselves here (half the bytes of allreduce_pieces' float32
    // slots), reduced in float32 by reduce_sources.
    const size_t chunk = segment_->slot_bytes() / esize;
    const size_t align = std::max<size_t>(1, kAlign / esize);
    for (size_t base = 0; base < count; base += chunk) {
      const size_t m = std::min(chunk, count - base);
      const size_t per = round_up((m + size_ - 1) / size_, align);
      auto part = [&](int k) {
        size_t lo = std::min(static_cast<size_t>(k) * per, m);
        return std::pair<size_t, size_t>{lo, std::min(lo + per, m)};
      };
      const int set = next_set();
      std::byte* mine = segment_->slot(set, rank_);
      auto [lo, hi] = part(rank_);
      // Publish only the parts other ranks reduce; this rank reads its own part in place.
      if (lo > 0) std::memcpy(mine, data + base * esize, lo * esize);
      if (hi < m) std::memcpy(mine + hi * esize, data + (base + hi) * esize, (m - hi) * esize);
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      // Reduce-scatter: this rank owns elements [lo, hi) of the chunk; the result goes to its
      // own buffer and, in the same pass, to its slot for the others to copy.
      if (hi > lo) {
        for (int k = 0; k < size_; ++k)
          sources_[k] = k == rank_ ? static_cast<const void*>(data + (base + lo) * esize)
                                   : segment_->slot(set, k) + lo * esize;
        shm::reduce_sources(data + (base + lo) * esize, sources_.data(), size_, hi - lo, dtype, op,
                            mine + lo * esize);
      }
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      // Allgather: every other rank's reduced part.
      for (int k = 0; k < size_; ++k) {
        if (k == rank_) continue;
        auto [klo, khi] = part(k);
        if (khi > klo)
          std::memcpy(data + (base + klo) * esize, segment_->slot(set, k) + klo * esize,
                      (khi - klo) * esize);
      }
    }
    return Status::ok();
  }

  // The fused allreduce without a fusion buffer: the chunks and parts of allreduce() over the
  // pieces' virtual concatenation, pipelined with one barrier per chunk (see below). Each rank
  // copies (and prescales) its input straight from the tensors into its slot, reduces its own
  // part reading its own input in place where it can (native type, no prescale), applies
  // Average's division and the postscale in that same pass (reduce_sources_finished), writing
  // the result into its outputs and over the next rank's input copy in the segment
  // (result_slot), and copies every part straight into the tensors' outputs. Each element is
  // still reduced once, in rank order, by one rank: every rank
  // gets the same bits. float16/bfloat16 travel widened to float32 (slots hold the work type)
  // and are rounded once, by the part's owner.
  Status allreduce_pieces(std::span<const ReducePiece> pieces, DataType dtype, ReduceOp op,
                          const ReduceScaling& scaling, std::vector<std::byte>& staging,
                          PiecePhases* phases) override {
    HVRUN_RETURN_IF_ERROR(aborted_status());
    if (size_ == 1)
      return allreduce_pieces_packed(*this, pieces, dtype, op, scaling, staging, phases);
    const DataType work = work_dtype(dtype);
    const size_t wsize = dtype_size(work);
    // Large pieces start at the same place in a 4 KiB page of the slots, so a tensor's offset
    // from the slot bytes it meets is fixed by its own page offset, not by the tensors before
    // it: packed back to back, ResNet-50's tensors in backward order ran about 20% slower.
    layout_.assign(pieces, kPieceAlignBytes / wsize, kPieceAlignFromBytes / wsize,
                   kPieceStartInPageBytes / wsize);
    const size_t count = layout_.total();
    if (count == 0) return Status::ok();
    const size_t esize = dtype_size(dtype);
    // This rank's own part can be a reduction source in place (no copy) when nothing changes it.
    const bool direct = work == dtype && scaling.prescale == 1.0;
    shm::PhaseLap lap(phases);
    const auto deadline = start("allreduce");
    // dst (work type) <- the virtual range [begin, end): prescaled inputs, identities for a
    // joined rank's (null) inputs.
    auto pack = [&](std::byte* dst, size_t begin, size_t end) {
      layout_.for_each(begin, end, [&](const ReducePiece& p, size_t off, size_t v, size_t n) {
        std::byte* d = dst + (v - begin) * wsize;
        if (p.input)
          pack_scaled(d, static_cast<const std::byte*>(p.input) + off * esize, n, dtype,
                      scaling.prescale);
        else
          fill_neutral(d, n, dtype, op);
      });
    };
    auto finish = [&](const void* const* sources, size_t n, void* out, void* copy) {
      shm::reduce_sources_finished(out, copy, sources, size_, n, dtype, op, scaling.divisor,
                                   scaling.postscale);
    };

    if (count * wsize <= kLatencyPathBytes && count * wsize <= segment_->slot_bytes()) {
      // One barrier: every rank reduces everything from the slots itself.
      const int set = next_set();
      pack(segment_->slot(set, rank_), 0, count);
      lap.add(&PiecePhases::pack);
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      layout_.for_each(0, count, [&](const ReducePiece& p, size_t off, size_t v, size_t n) {
        if (!p.output) return;
        for (int k = 0; k < size_; ++k) sources_[k] = segment_->slot(set, k) + v * wsize;
        finish(sources_.data(), n, static_cast<std::byte*>(p.output) + off * esize, nullptr);
      });
      lap.add(&PiecePhases::collective);
      return Status::ok();
    }
    // Pipelined over rounds with one barrier each: round k copies chunk k-2's results out,
    // reduces chunk k-1, copies chunk k in, then waits for everyone. Chunk c lives in buffer set
    // (first + c) % kBufferSets. Within a round, a rank writes set(k) (copy-in) and its own part
    // of set(k-1) (results), while the others read their parts of set(k-1) and the owners'
    // parts of set(k-2): never the same bytes; set(k) was last read in round k-1 (chunk k-3's
    // copy-out), before the barrier that ended it. The next op starts at set (first + n + 1).
    const size_t chunk = segment_->slot_bytes() / wsize;
    const size_t align = std::max<size_t>(1, kAlign / wsize);
    const size_t chunks = (count + chunk - 1) / chunk;
    const int first = round_;
    round_ = static_cast<int>((static_cast<size_t>(first) + chunks + 1) % shm::kBufferSets);
    auto set_of = [&](size_t c) {
      return static_cast<int>((static_cast<size_t>(first) + c) % shm::kBufferSets);
    };
    struct Chunk {
      size_t base, m, per;
      std::pair<size_t, size_t> part(int k) const {  // [lo, hi) of rank k, chunk-relative
        const size_t lo = std::min(static_cast<size_t>(k) * per, m);
        return {lo, std::min(lo + per, m)};
      }
    };
    auto chunk_at = [&](size_t c) {
      const size_t base = c * chunk;
      const size_t m = std::min(chunk, count - base);
      return Chunk{base, m, round_up((m + size_ - 1) / size_, align)};
    };
    // Publish the parts other ranks reduce; this rank's own part goes to its slot only where it
    // cannot be read in place.
    auto copy_in = [&](size_t c) {
      const Chunk g = chunk_at(c);
      std::byte* mine = segment_->slot(set_of(c), rank_);
      auto [lo, hi] = g.part(rank_);
      pack(mine, g.base, g.base + lo);
      pack(mine + hi * wsize, g.base + hi, g.base + g.m);
      layout_.for_each(g.base + lo, g.base + hi,
                       [&](const ReducePiece& p, size_t, size_t v, size_t n) {
                         if (!(direct && p.input)) pack(mine + (v - g.base) * wsize, v, v + n);
                       });
    };
    // Reduce-scatter: this rank's part, finished, into its outputs and (for the others) over
    // the next rank's input in that rank's slot (result_slot), at or below the source bytes it
    // is computed from.
    auto reduce = [&](size_t c) {
      const Chunk g = chunk_at(c);
      const int set = set_of(c);
      std::byte* mine = segment_->slot(set, rank_);
      std::byte* result = segment_->slot(set, result_slot(rank_));
      auto [lo, hi] = g.part(rank_);
      layout_.for_each(g.base + lo, g.base + hi,
                       [&](const ReducePiece& p, size_t off, size_t v, size_t n) {
        const size_t at = v - g.base;
        for (int k = 0; k < size_; ++k)
          sources_[k] = k != rank_ ? segment_->slot(set, k) + at * wsize
                        : direct && p.input ? static_cast<const std::byte*>(p.input) + off * esize
                                            : mine + at * wsize;
        void* out = p.output ? static_cast<std::byte*>(p.output) + off * esize : nullptr;
        finish(sources_.data(), n, out, result + lo * wsize + (at - lo) * esize);
      });
    };
    // Allgather: every other rank's finished part, straight into the outputs.
    auto copy_out = [&](size_t c) {
      const Chunk g = chunk_at(c);
      for (int k = 0; k < size_; ++k) {
        if (k == rank_) continue;
        auto [klo, khi] = g.part(k);
        const std::byte* from = segment_->slot(set_of(c), result_slot(k)) + klo * wsize;
        layout_.for_each(g.base + klo, g.base + khi,
                         [&](const ReducePiece& p, size_t off, size_t v, size_t n) {
          if (p.output)
            std::memcpy(static_cast<std::byte*>(p.output) + off * esize,
                        from + (v - g.base - klo) * esize, n * esize);
        });
      }
    };
    for (size_t k = 0; k <= chunks; ++k) {
      if (k >= 2) {
        copy_out(k - 2);
        lap.add(&PiecePhases::unpack);
      }
      if (k >= 1) {
        reduce(k - 1);
        lap.add(&PiecePhases::collective);
      }
      if (k < chunks) {
        copy_in(k);
        lap.add(&PiecePhases::pack);
      }
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      lap.add(&PiecePhases::collective);
    }
    copy_out(chunks - 1);
    lap.add(&PiecePhases::unpack);
    return Status::ok();
  }

  Status allgatherv(const void* input, void* output, std::span<const size_t> recv_bytes) override {
    HVRUN_RETURN_IF_ERROR(aborted_status());
    const size_t total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0});
    if (total == 0) return Status::ok();
    auto* out = static_cast<std::byte*>(output);
    const auto* in = static_cast<const std::byte*>(input);
    std::vector<size_t> offset(size_, 0);
    for (int k = 1; k < size_; ++k) offset[k] = offset[k - 1] + recv_bytes[k - 1];
    const size_t mine = recv_bytes[rank_];
    if (mine > 0 && out + offset[rank_] != in) std::memmove(out + offset[rank_], in, mine);
    if (size_ == 1) return Status::ok();
    const auto deadline = start("allgather");
    const size_t slot = segment_->slot_bytes();
    const size_t largest = *std::max_element(recv_bytes.begin(), recv_bytes.end());
    for (size_t at = 0; at < largest; at += slot) {
      const int set = next_set();
      if (at < mine) std::memcpy(segment_->slot(set, rank_), in + at, std::min(slot, mine - at));
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      for (int k = 0; k < size_; ++k) {
        if (k == rank_ || at >= recv_bytes[k]) continue;
        std::memcpy(out + offset[k] + at, segment_->slot(set, k),
                    std::min(slot, recv_bytes[k] - at));
      }
    }
    return Status::ok();
  }

  Status broadcast(void* buffer, size_t bytes, int root) override {
    HVRUN_RETURN_IF_ERROR(aborted_status());
    if (bytes == 0 || size_ == 1) return Status::ok();
    const auto deadline = start("broadcast");
    auto* data = static_cast<std::byte*>(buffer);
    // The root writes a whole buffer set (every slot of it) per round.
    const size_t region = segment_->slot_bytes() * static_cast<size_t>(size_);
    for (size_t at = 0; at < bytes; at += region) {
      const int set = next_set();
      const size_t n = std::min(region, bytes - at);
      if (rank_ == root) std::memcpy(segment_->slot(set, 0), data + at, n);
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      if (rank_ != root) std::memcpy(data + at, segment_->slot(set, 0), n);
    }
    return Status::ok();
  }

  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override {
    HVRUN_RETURN_IF_ERROR(aborted_status());
    const auto* in = static_cast<const std::byte*>(input);
    auto* out = static_cast<std::byte*>(output);
    std::vector<size_t> send_at(size_, 0), recv_at(size_, 0);
    for (int k = 1; k < size_; ++k) {
      send_at[k] = send_at[k - 1] + send_bytes[k - 1];
      recv_at[k] = recv_at[k - 1] + recv_bytes[k - 1];
    }
    const size_t own = std::min(send_bytes[rank_], recv_bytes[rank_]);
    if (own > 0) std::memmove(out + recv_at[rank_], in + send_at[rank_], own);
    if (size_ == 1) return Status::ok();
    const auto deadline = start("alltoall");
    // Each slot is cut into one sub-slot per destination. How many rounds the largest pair needs
    // travels with round 0 (every rank publishes its own largest send).
    const size_t sub = segment_->slot_bytes() / static_cast<size_t>(size_) / kAlign * kAlign;
    const size_t largest_send = *std::max_element(send_bytes.begin(), send_bytes.end());
    size_t rounds = 1;
    for (size_t round = 0; round < rounds; ++round) {
      const size_t at = round * sub;
      const int set = next_set();
      std::byte* mine = segment_->slot(set, rank_);
      for (int d = 0; d < size_; ++d)
        if (d != rank_ && at < send_bytes[d])
          std::memcpy(mine + d * sub, in + send_at[d] + at, std::min(sub, send_bytes[d] - at));
      if (round == 0) segment_->line(rank_).meta[set].store(largest_send);
      HVRUN_RETURN_IF_ERROR(barrier_step(deadline));
      if (round == 0) {
        size_t largest = 0;
        for (int k = 0; k < size_; ++k)
          largest = std::max<size_t>(largest, segment_->line(k).meta[set].load());
        rounds = std::max<size_t>(1, (largest + sub - 1) / sub);
      }
      for (int s = 0; s < size_; ++s)
        if (s != rank_ && at < recv_bytes[s])
          std::memcpy(out + recv_at[s] + at, segment_->slot(set, s) + rank_ * sub,
                      std::min(sub, recv_bytes[s] - at));
    }
    return Status::ok();
  }

  // The segment's round board (null for a group of one); lives as long as this backend.
  shm::RoundBoard* round_board() { return board_.get(); }

  Status barrier() override {
    HVRUN_RETURN_IF_ERROR(aborted_status());
    if (size_ == 1) return Status::ok();
    return barrier_step(start("barrier"));
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard<std::mutex> lock(abort_mutex_);
      if (aborted_.load()) return;
      abort_reason_ = reason;
      aborted_.store(true);
    }
    if (!segment_) return;
    if (board_) board_->abort();
    shm::SegmentHeader& h = segment_->header();
    uint32_t expected = 0;
    if (h.abort_state.compare_exchange_strong(expected, 1)) {
      std::snprintf(h.abort_reason, sizeof h.abort_reason, "%s", reason.c_str());
      h.abort_rank = rank_;
      h.abort_state.store(2);
    }
    // Changing every futex word wakes sleepers for good: one about to sleep sees the new value.
    for (int k = 0; k < size_; ++k) {
      segment_->line(k).arrived.fetch_or(kAbortBit);
      shm::futex_wake_all(&segment_->line(k).arrived);
    }
  }

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  Deadline start(const char* op) {
    op_ = op;
    return std::chrono::steady_clock::now() + timeout_;
  }

  // allreduce_pieces: whose slot holds rank k's finished part. The owner writes it over the next
  // rank's copy of that part's input, which the owner has just read as a reduction source: the
  // store meets cache lines this core already holds, where a store into its own slot would
  // fetch lines a peer read last (its own slot's part then stays unused for native types), and
  // the chunks' slot bytes touched per round drop by a part per rank.
  int result_slot(int k) const { return (k + 1) % size_; }

  int next_set() {
    const int set = round_;
    round_ = (round_ + 1) % shm::kBufferSets;  // kept small: a wrapping counter would break the cycle
    return set;
  }

  bool reached(uint32_t value) const { return ((value - epoch_) & kCountMask) < (kCountMask >> 1); }

  // This rank arrives at the next barrier, then waits until every other rank did.
  Status barrier_step(Deadline deadline) {
    std::atomic<uint32_t>& mine = segment_->line(rank_).arrived;
    uint32_t old = mine.load(std::memory_order_relaxed);
    while (!mine.compare_exchange_weak(old, (old & kAbortBit) | ((old + 1) & kCountMask))) {
    }
    epoch_ = (epoch_ + 1) & kCountMask;
    if (segment_->line(rank_).sleepers.load() > 0) shm::futex_wake_all(&mine);
    for (int k = 0; k < size_; ++k) {
      if (k == rank_) continue;
      Status s = wait_for(k, deadline);
      if (!s.is_ok()) return s;
    }
    return Status::ok();
  }

  // Rank k's arrival counts before a teardown: a peer that arrived wrote its part of this step
  // first, so a teardown after it (the peer done, and leaving) must not fail this rank's step;
  // the next barrier, which the peer will not reach, sees the teardown.
  Status wait_for(int k, Deadline deadline) {
    shm::RankLine& line = segment_->line(k);
    for (int i = 0; i < kSpinPolls; ++i) {
      uint32_t v = line.arrived.load(std::memory_order_acquire);
      if (reached(v)) return Status::ok();
      if (v & kAbortBit) return aborted_status();
      shm::cpu_relax();
    }
    // Then keep polling, yielding the core between polls, for up to kYieldSpin: a peer that is
    // merely late (another process had its core) often arrives within it, and this rank neither
    // pays a futex wake-up nor lets its virtual CPU halt (waking a halted vCPU is what makes a
    // sleep expensive here), while a peer waiting for this core gets it at each yield.
    const auto yield_until = std::chrono::steady_clock::now() + kYieldSpin;
    do {
      for (int i = 0; i < kYieldPolls; ++i) {
        uint32_t v = line.arrived.load(std::memory_order_acquire);
        if (reached(v)) return Status::ok();
        if (v & kAbortBit) return aborted_status();
        sched_yield();
      }
    } while (std::chrono::steady_clock::now() < yield_until);
    while (true) {
      line.sleepers.fetch_add(1);
      uint32_t v = line.arrived.load();
      const auto left = deadline - std::chrono::steady_clock::now();
      if (!(v & kAbortBit) && !reached(v) && left > std::chrono::nanoseconds::zero())
        shm::futex_wait(&line.arrived, v, std::min<std::chrono::nanoseconds>(left, kMaxSleep));
      line.sleepers.fetch_sub(1);
      v = line.arrived.load(std::memory_order_acquire);
      if (reached(v)) return Status::ok();
      if (v & kAbortBit) return aborted_status();
      if (std::chrono::steady_clock::now() >= deadline) return timed_out(k);
    }
  }

  Status timed_out(int k) {
    std::string message =
        "shared-memory " + op_ + " timed out on local rank " + std::to_string(rank_) + " of " +
        std::to_string(size_) + " (host " + host_ + ") after " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout_).count()) +
        " s waiting for local rank " + std::to_string(k) + " (pid " +
        std::to_string(segment_->line(k).pid.load()) +
        "): it died, hangs, or runs other collectives (check its log; --op-timeout sets the bound)";
    abort(message);  // the host's other ranks must not wait on this one's timeout too
    return deadline_exceeded(message);
  }

  Status aborted_status() {
    if (aborted_.load()) {
      std::lock_guard<std::mutex> lock(abort_mutex_);
      return aborted(abort_reason_);
    }
    if (!segment_) return Status::ok();
    shm::SegmentHeader& h = segment_->header();
    uint32_t state = h.abort_state.load();
    if (state == 0 && !(segment_->line(rank_).arrived.load() & kAbortBit)) return Status::ok();
    // A peer is writing its reason (a few hundred bytes): wait for it rather than report the
    // teardown without its cause. Bounded, for a peer killed while writing it.
    const auto reason_due = std::chrono::steady_clock::now() + kReasonWait;
    while (state == 1 && std::chrono::steady_clock::now() < reason_due) {
      sched_yield();
      state = h.abort_state.load();
    }
    // The peer's reason first: usually the job's abort, which this rank's own JobAbort would
    // carry too (it may simply not have arrived yet).
    if (state != 2)
      return aborted("shared-memory data plane on host " + host_ + " torn down by a peer");
    return aborted(std::string(h.abort_reason) + " (shared-memory data plane on host " + host_ +
                   " torn down by local rank " + std::to_string(h.abort_rank) + ")");
  }

  std::unique_ptr<shm::Segment> segment_;  // null for a group of one
  std::unique_ptr<shm::RoundBoard> board_;  // in segment_; null with it
  int rank_;
  int size_;
  std::string host_;
  std::chrono::milliseconds timeout_;
  uint32_t epoch_ = 0;  // barriers this rank reached (its counter, without the abort bit)
  int round_ = 0;  // the next round's buffer set (rounds so far, modulo kBufferSets)
  std::string op_;
  std::vector<const void*> sources_;
  shm::PieceLayout layout_;  // allreduce_pieces' pieces (storage reused across calls)
  std::atomic<bool> aborted_{false};
  std::mutex abort_mutex_;  // guards abort_reason_
  std::string abort_reason_;
};

}  // namespace

Result<ShmDataPlane> make_shm_data_plane(const ShmBackendOptions& options, KeyValueStore& store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    return invalid_argument("shm backend: rank " + std::to_string(options.rank) +
                            " outside a group of " + std::to_string(options.size));
  std::unique_ptr<shm::Segment> segment;
  if (options.size > 1) {
    shm::SegmentOptions seg{
        .job_id = options.job_id,
        .host = options.host,
        .local_rank = options.rank,
        .local_size = options.size,
        // alltoallv cuts a slot into one cache-line-aligned part per rank
        .slot_bytes = std::max(options.chunk_bytes, static_cast<size_t>(options.size) * kAlign),
        .kv_prefix = options.kv_prefix,
        .timeout = options.connect_timeout};
    HVRUN_ASSIGN_OR_RETURN(segment, shm::Segment::attach(seg, store));
  }
  auto backend = std::make_unique<ShmBackend>(std::move(segment), options);
  shm::RoundBoard* board = backend->round_board();
  return ShmDataPlane{std::move(backend), board};
}

Result<std::unique_ptr<Backend>> make_shm_backend(const ShmBackendOptions& options,
                                                  KeyValueStore& store) {
  HVRUN_ASSIGN_OR_RETURN(ShmDataPlane plane, make_shm_data_plane(options, store));
  return std::move(plane.backend);
}

}  // namespace hvrun::detail
