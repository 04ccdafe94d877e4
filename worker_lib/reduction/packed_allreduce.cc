// The default Backend::allreduce_pieces (backend.h): pack every piece into the caller's staging
// buffer, one allreduce, scale every result out.
#include <chrono>

#include "worker_lib/backend.h"
#include "worker_lib/reduction/reduction_math.h"

namespace hvrun::detail {
namespace {

using PhaseClock = std::chrono::steady_clock;

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
  size_t total = 0;
  for (const ReducePiece& p : pieces) total += p.count;
  if (total == 0) return Status::ok();
  if (staging.size() < total * wsize) staging.resize(total * wsize);
  std::byte* at_byte = staging.data();
  for (const ReducePiece& p : pieces) {
    if (p.count == 0) continue;
    if (p.input) pack_scaled(at_byte, p.input, p.count, dtype, scaling.prescale);
    else fill_neutral(at_byte, p.count, dtype, op);
    at_byte += p.count * wsize;
  }
  lap(pack_time, at);
  if (reduce) HVRUN_RETURN_IF_ERROR(backend.allreduce(staging.data(), total, work, wire_op));
  lap(collective_time, at);
  at_byte = staging.data();
  for (const ReducePiece& p : pieces) {
    if (p.output && p.count)
      finish_scaled(p.output, at_byte, p.count, dtype, scaling.divisor, scaling.postscale);
    at_byte += p.count * wsize;
  }
  lap(unpack_time, at);
  return Status::ok();
}

}  // namespace hvrun::detail
