// What executes a response of the coordinator's plan on one kind of device: the CPU executor
// over a Backend (cpu_executor.h) and the GPU executor over a DevicePlane
// (backends/nccl/gpu_executor.h). PlanExecutor (plan_executor.h) picks one by the response's
// device and completes the handles.
//
// Contract: every rank executes the same responses in the same order (the plan guarantees it),
// on one thread at a time (the holder of the runtime's executor lock). Nothing throws.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "hvrun.pb.h"
#include "worker_lib/execution/pending_op.h"

namespace hvrun::detail {

// entries[i] is this rank's op for response.tensors(i), or null when this rank joined (or never
// submitted it): it takes part with neutral data.
using ResponseEntries = std::vector<std::shared_ptr<PendingOp>>;

// This rank's payload bytes in a response (what telemetry counts for it).
inline uint64_t local_bytes(const v1::Response& r, const ResponseEntries& e) {
  uint64_t bytes = 0;
  const size_t esize = dtype_size(static_cast<DataType>(r.dtype()));
  for (const auto& entry : e)
    if (entry) bytes += static_cast<uint64_t>(num_elements(entry->shape)) * esize;
  return bytes;
}

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs one data-moving response (allreduce, reducescatter, allgather, broadcast, alltoall)
  // and returns the status its handles get; completes none of them.
  virtual Status execute(const v1::Response& response, const ResponseEntries& entries) = 0;
  // The same, but it may return before the work finished (queued on a device): `finish` gets
  // the status for the handles exactly once, on this thread before returning or later on
  // another. `response` and `entries` need not outlive the call. By default execute() runs and
  // finishes at once.
  virtual void execute_then(const v1::Response& response, const ResponseEntries& entries,
                            std::function<void(Status)> finish) {
    finish(execute(response, entries));
  }
  // Returns once every response execute_then() left running has finished.
  virtual void drain() {}
  // Any thread: the operation in progress and every later one fail with kAborted carrying
  // `reason`. Idempotent; the first reason wins.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace hvrun::detail
