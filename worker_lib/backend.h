// The data-plane interface: how a worker moves tensor bytes between ranks once the
// coordinator's plan says what to run. Implementations: backends/gloo (CPU, TCP). NCCL (CUDA
// tensors) and MPI / shared memory (CPU) slot in beside it.
//
// Contract: every rank calls the same operations in the same order with matching sizes (the
// plan guarantees it). Calls come from one thread (the worker's background thread). Each call
// is bounded by the backend's operation timeout and reports failures as a Status naming the
// operation and the peer where known; nothing throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "hvrun/types.h"

namespace hvrun::detail {

// One tensor of a fused allreduce (Backend::allreduce_pieces): `count` elements read from
// `input` and the result written to `output`. input == output is allowed (in place); a null
// input contributes the op's identity (a joined rank); a null output discards the result (the
// parts of a reducescatter this rank does not keep).
struct ReducePiece {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
};

// Scaling applied around the reduction: every contribution is multiplied by `prescale` before
// it is reduced; the result is divided by `divisor` (Average: the contributing ranks; integer
// types truncate) and multiplied by `postscale`. float32 scales in float, float64 in double,
// float16/bfloat16 in float32 before their one rounding.
struct ReduceScaling {
  double prescale = 1.0;
  double postscale = 1.0;
  int divisor = 1;
};

// Where a fused allreduce's time went, for telemetry (filled only when the caller passes one):
// copying/scaling in, the collective itself (barriers, waits and reductions), copying out. A
// backend that interleaves them per chunk reports the sums.
struct PiecePhases {
  std::chrono::nanoseconds pack{0};
  std::chrono::nanoseconds collective{0};
  std::chrono::nanoseconds unpack{0};
};

class Backend;

// allreduce_pieces' default: packs the pieces (prescaled; float16/bfloat16 widened to float32)
// into `staging`, allreduces, then scales each result out into its piece's output, 64 MiB of
// staging at a time (every rank cuts the same windows), so `staging` never grows past that. A
// single native-typed piece is reduced in its output buffer instead (no staging copy).
// Defined in reduction/packed_allreduce.cc.
Status allreduce_pieces_packed(Backend& backend, std::span<const ReducePiece> pieces,
                               DataType dtype, ReduceOp op, const ReduceScaling& scaling,
                               std::vector<std::byte>& staging, PiecePhases* phases);

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place elementwise reduction of `count` elements of `dtype` across ranks; every rank
  // ends with bitwise-identical results. `op` is Sum, Min, Max or Product (Average is a Sum the
  // caller divides). float16/bfloat16 accumulate in float32 and round once.
  virtual Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) = 0;

  // A fused allreduce straight from the callers' tensors: the pieces, concatenated in order,
  // are reduced as one buffer of `dtype` with `op` (Average reduces as a Sum; set
  // scaling.divisor), scaled as `scaling` says, and every piece's result lands in its output.
  // Every rank passes the same number of pieces with the same counts in the same order (a
  // backend may lay them out by count) and ends with bitwise-identical results. `staging` is the caller's reusable buffer (grows, never shrinks) for backends that
  // pack; `phases`, when not null, receives the time split. Backends that can read and write the
  // tensors directly override this (shm); the default packs (allreduce_pieces_packed).
  virtual Status allreduce_pieces(std::span<const ReducePiece> pieces, DataType dtype,
                                  ReduceOp op, const ReduceScaling& scaling,
                                  std::vector<std::byte>& staging, PiecePhases* phases) {
    return allreduce_pieces_packed(*this, pieces, dtype, op, scaling, staging, phases);
  }

  // Every rank's `input` (recv_bytes[rank] bytes) concatenated in rank order into `output`.
  virtual Status allgatherv(const void* input, void* output,
                            std::span<const size_t> recv_bytes) = 0;

  // `bytes` bytes of root's `buffer` copied into every rank's `buffer`.
  virtual Status broadcast(void* buffer, size_t bytes, int root) = 0;

  // send_bytes[r] bytes (consecutive in `input`) go to rank r; recv_bytes[r] bytes from rank r
  // land consecutively in `output`, in rank order.
  virtual Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                           std::span<const size_t> recv_bytes) = 0;

  virtual Status barrier() = 0;

  // Tears the data plane down: every operation in progress (on any thread) and every later one
  // fails promptly with kAborted carrying `reason`, and peers blocked on this rank see their
  // connections close. Called from any thread (the runtime's reader on JobAbort or a lost
  // coordinator; the backend itself after a failed operation). Idempotent; the first reason wins.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace hvrun::detail
