// The default Backend::allreduce_pieces (backend.h): pack the pieces into the caller's staging
// buffer, allreduce, scale every result out; window by window.
#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>

#include "worker_lib/backend.h"
#include "worker_lib/reduction/reduction_math.h"

namespace hvrun::detail {
namespace {

using PhaseClock = std::chrono::steady_clock;

// The most bytes (of the work type) staged at once. Measured on Gloo (2 ranks, a 256 MiB
// float16 tensor): 64 MiB windows ran as fast as staging it whole, 16 MiB ones 25-35% slower.
constexpr size_t kStagingWindowBytes = size_t{64} << 20;

// Adds the time since `since` to `into` (only when phases are wanted) and restarts the clock.
void lap(std::chrono::nanoseconds* into, PhaseClock::time_point& since) {
  if (into == nullptr) return;
  const auto now = PhaseClock::now();
  *into += now - since;
  since = now;
}

}  // namespace

Status allreduce_pieces_packed(Backend& backend, std::span<const ReducePiece> pieces,
                               DataType dtype, ReduceOp op, const ReduceScaling& scaling,
                               std::vector<std::byte>& staging, PiecePhases* phases) {
  const ReduceOp wire_op = op == ReduceOp::kAverage ? ReduceOp::kSum : op;
  const DataType work = work_dtype(dtype);
  const bool reduce = backend.size() > 1;
  PhaseClock::time_point at{};
  if (phases) at = PhaseClock::now();
  auto* pack_time = phases ? &phases->pack : nullptr;
  auto* collective_time = phases ? &phases->collective : nullptr;
  auto* unpack_time = phases ? &phases->unpack : nullptr;

  // A lone native-typed tensor is reduced where its result goes: no staging copy.
  if (pieces.size() == 1 && work == dtype && pieces[0].input && pieces[0].output) {
    const ReducePiece& p = pieces[0];
    if (p.count == 0) return Status::ok();
    pack_scaled(p.output, p.input, p.count, dtype, scaling.prescale);
    lap(pack_time, at);
    if (reduce) HVRUN_RETURN_IF_ERROR(backend.allreduce(p.output, p.count, dtype, wire_op));
    lap(collective_time, at);
    finish_scaled(p.output, p.output, p.count, dtype, scaling.divisor, scaling.postscale);
    lap(unpack_time, at);
    return Status::ok();
  }
  const size_t wsize = dtype_size(work);
  const size_t esize = dtype_size(dtype);
  size_t total = 0;
  for (const ReducePiece& p : pieces) total += p.count;
  if (total == 0) return Status::ok();
  // The pieces' concatenation goes through `staging` one window at a time: the buffer (kept
  // for the next call) never outgrows a window, whatever the tensor (a float16 one widened to
  // float32 would otherwise take twice its own size, for good).
  const size_t window = std::max<size_t>(1, kStagingWindowBytes / wsize);
  if (staging.size() < std::min(total, window) * wsize) staging.resize(std::min(total, window) * wsize);
  // Where the next window starts: piece `piece`, element `offset` of it.
  size_t piece = 0, offset = 0;
  for (size_t begin = 0; begin < total; begin += window) {
    const size_t n = std::min(window, total - begin);
    // Calls `fn(piece, first element in it, staging position, count)` for the window's parts.
    auto for_each_part = [&](auto&& fn) {
      size_t i = piece, off = offset, placed = 0;
      while (placed < n) {
        const ReducePiece& p = pieces[i];
        const size_t take = std::min(p.count - off, n - placed);
        if (take > 0) fn(p, off, staging.data() + placed * wsize, take);
        placed += take;
        off += take;
        if (off == p.count) {
          ++i;
          off = 0;
        }
      }
      return std::pair<size_t, size_t>(i, off);
    };
    for_each_part([&](const ReducePiece& p, size_t off, std::byte* to, size_t count) {
      if (p.input) pack_scaled(to, static_cast<const std::byte*>(p.input) + off * esize, count,
                               dtype, scaling.prescale);
      else fill_neutral(to, count, dtype, op);
    });
    lap(pack_time, at);
    if (reduce) HVRUN_RETURN_IF_ERROR(backend.allreduce(staging.data(), n, work, wire_op));
    lap(collective_time, at);
    std::tie(piece, offset) =
        for_each_part([&](const ReducePiece& p, size_t off, std::byte* from, size_t count) {
          if (p.output)
            finish_scaled(static_cast<std::byte*>(p.output) + off * esize, from, count, dtype,
                          scaling.divisor, scaling.postscale);
        });
    lap(unpack_time, at);
  }
  return Status::ok();
}

}  // namespace hvrun::detail
