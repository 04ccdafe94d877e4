// The data-plane interface: how a worker moves tensor bytes between ranks once the
// coordinator's plan says what to run. Implementations: backends/gloo (CPU, TCP). NCCL (CUDA
// tensors) and MPI / shared memory (CPU) slot in beside it.
//
// Contract: every rank calls the same operations in the same order with matching sizes (the
// plan guarantees it). Calls come from one thread (the worker's background thread). Each call
// is bounded by the backend's operation timeout and reports failures as a Status naming the
// operation and the peer where known; nothing throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "hvrun/types.h"

namespace hvrun::detail {

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
