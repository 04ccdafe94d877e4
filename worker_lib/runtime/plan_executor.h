// Executes one Response of the coordinator's plan through the backend: packs the tensors into
// the fusion buffer, runs the collective, unpacks, and completes the handles. Joined ranks (no
// local tensor) take part with neutral data so nobody waits for them.
//
// Threads: only the worker's background thread calls execute(). The fusion buffers are members
// and reused from one response to the next (they grow, never shrink, during a job).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "hvrun.pb.h"
#include "worker_lib/backend.h"
#include "worker_lib/backends/nccl/gpu_executor.h"
#include "worker_lib/runtime/pending_op.h"

namespace hvrun::detail {

class PlanExecutor {
 public:
  PlanExecutor(Backend& backend, int rank, int size)
      : backend_(backend), rank_(rank), size_(size) {}

  // entries[i] is this rank's op for response.tensors(i), or null when this rank joined (or
  // never submitted it). Completes every non-null entry's handle.
  void execute(const v1::Response& response, const std::vector<std::shared_ptr<PendingOp>>& entries);

  // Called with a failed collective's status before the handles complete; returns the status
  // they get (the runtime waits briefly for the coordinator's JobAbort, whose reason names the
  // dead rank, instead of the data plane's "connection reset").
  void set_failure_explainer(std::function<Status(Status)> explain) { explain_ = std::move(explain); }

  // Responses on CUDA tensors go to the NCCL data plane (backends/nccl/gpu_executor.h), which
  // loads libhvrun_cuda.so and creates its communicator on the first of them. Without this
  // call they fail with a message saying so. Call before the first execute().
  void enable_gpu(GpuJob job) { gpu_ = std::make_unique<GpuExecutor>(std::move(job)); }
  // Any thread: fails the GPU operation in progress and every later one with kAborted.
  void abort_gpu(const std::string& reason) {
    if (gpu_) gpu_->abort(reason);
  }
  // Any thread: how library-allocated CUDA outputs are allocated from now on.
  void set_device_allocator(DeviceAllocator allocator) {
    if (gpu_) gpu_->set_device_allocator(std::move(allocator));
  }

  // Bytes currently held by the reused buffers (for tests and metrics).
  size_t buffer_capacity() const { return fusion_.capacity() + scratch_.capacity(); }

 private:
  Status allreduce(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status allreduce_in_output(const v1::Response& r, PendingOp& entry);
  Status reducescatter(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status allgather(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status broadcast(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status alltoall(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status execute_on_gpu(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);

  // Packs every tensor of `r` (or neutral data) into fusion_ and reduces it across ranks.
  // Returns the work dtype; offsets[i] is tensor i's first element in fusion_.
  Status reduce_into_fusion(const v1::Response& r,
                            const std::vector<std::shared_ptr<PendingOp>>& e,
                            std::vector<size_t>& offsets);
  std::byte* reserve(std::vector<std::byte>& buffer, size_t bytes);
  int contributors(const v1::Response& r) const;

  Backend& backend_;
  std::function<Status(Status)> explain_;
  int rank_;
  int size_;
  std::vector<std::byte> fusion_;   // reused across responses
  std::vector<std::byte> scratch_;  // reused: second buffer (allgather/alltoall input, joined ranks)
  std::unique_ptr<GpuExecutor> gpu_;  // set once by enable_gpu(), before execute() runs
};

}  // namespace hvrun::detail
