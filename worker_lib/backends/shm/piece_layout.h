// Where the elements of a fused allreduce live (ShmBackend::allreduce_pieces): the pieces,
// concatenated in order (large ones starting at one place in a 4 KiB page), form one virtual
// buffer of `total()` elements, which the backend cuts into chunks and parts exactly as it cuts a
// contiguous buffer. PieceLayout maps a range of that virtual buffer back onto the pieces it
// covers. Zero-count pieces and the alignment gaps cover nothing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include "worker_lib/backend.h"

namespace hvrun::detail::shm {

class PieceLayout {
 public:
  // Reuses its storage from one call to the next (the backend keeps one layout). Pieces of at
  // least `align_from` elements start `shift` elements past a multiple of `align` elements (the
  // gaps belong to no piece: nothing is copied, reduced or written there). Every rank passes the
  // same counts, so every rank computes the same layout.
  void assign(std::span<const ReducePiece> pieces, size_t align, size_t align_from,
              size_t shift = 0) {
    pieces_ = pieces;
    starts_.resize(pieces.size());
    size_t at = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (align > 1 && pieces[i].count >= align_from) at += (shift + align - at % align) % align;
      starts_[i] = at;
      at += pieces[i].count;
    }
    total_ = at;
  }

  size_t total() const { return total_; }

  // fn(piece, offset inside the piece, virtual index, count) for every piece overlapping
  // [begin, end), in order.
  template <typename Fn>
  void for_each(size_t begin, size_t end, Fn&& fn) const {
    if (begin >= end || pieces_.empty()) return;
    // The last piece starting at or before `begin`: the only one that can contain it.
    size_t p = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) -
                                   starts_.begin());
    p = p == 0 ? 0 : p - 1;
    for (; p < pieces_.size() && starts_[p] < end; ++p) {
      const size_t lo = std::max(begin, starts_[p]);
      const size_t hi = std::min(end, starts_[p] + pieces_[p].count);
      if (lo < hi) fn(pieces_[p], lo - starts_[p], lo, hi - lo);
    }
  }

 private:
  std::span<const ReducePiece> pieces_;
  std::vector<size_t> starts_;  // starts_[i]: first virtual index of piece i
  size_t total_ = 0;
};

// Splits a call's time into PiecePhases' fields: add(field) charges the time since the last
// add() to that field. Reads the clock only when the caller asked for phases.
class PhaseLap {
 public:
  explicit PhaseLap(PiecePhases* phases) : phases_(phases) {
    if (phases_) at_ = std::chrono::steady_clock::now();
  }
  void add(std::chrono::nanoseconds PiecePhases::*field) {
    if (!phases_) return;
    const auto now = std::chrono::steady_clock::now();
    phases_->*field += now - at_;
    at_ = now;
  }

 private:
  PiecePhases* phases_;
  std::chrono::steady_clock::time_point at_{};
};

}  // namespace hvrun::detail::shm
