// Executes one Response of the coordinator's plan through the backend and completes the handles.
// Allreduce and reducescatter hand the backend the tensors themselves (Backend::
// allreduce_pieces): the shm backend reduces straight from and into them, others pack into the
// fusion buffer. The other collectives pack / run / unpack here. Joined ranks (no
// local tensor) take part with neutral data so nobody waits for them.
//
// Threads: execute() runs under the runtime's executor lock: the background thread's plans, or
// an API thread's fast-path collective (runtime_fast_path.cc). The fusion buffers are members
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
#include "worker_lib/telemetry/phase_observer.h"

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

  // Telemetry (worker_lib/telemetry/phase_observer.h): told about every pack / collective /
  // unpack phase from now on; null = off. `backend_name` names the CPU backend in reports.
  // Call before the first execute(); the observer outlives the executor.
  void set_phase_observer(telemetry::PhaseObserver* observer, std::string backend_name) {
    phase_observer_ = observer;
    backend_name_ = std::move(backend_name);
  }

  // The CPU backend's name in telemetry from now on (the fast path counts its collectives as
  // "shm-fast"); the caller holds the executor's lock.
  void set_backend_name(std::string name) { backend_name_ = std::move(name); }
  const std::string& backend_name() const { return backend_name_; }

  // Bytes currently held by the reused buffers (for tests and metrics).
  size_t buffer_capacity() const { return fusion_.capacity() + scratch_.capacity(); }

 private:
  Status allreduce(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status reducescatter(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status allgather(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status broadcast(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status alltoall(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status execute_on_gpu(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);

  // allreduce/reducescatter: pieces_ <- one piece per tensor of `r` (joined: no input/output).
  Status pieces_of(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  // Reduces pieces_ as one fused allreduce (Backend::allreduce_pieces), with r's op and scaling.
  Status reduce_pieces(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  std::byte* reserve(std::vector<std::byte>& buffer, size_t bytes);
  int contributors(const v1::Response& r) const;

  Backend& backend_;
  std::function<Status(Status)> explain_;
  int rank_;
  int size_;
  std::vector<std::byte> fusion_;   // reused across responses (backends that pack stage here)
  std::vector<ReducePiece> pieces_;  // reused: the current allreduce's tensors
  std::vector<std::byte> scratch_;  // reused: second buffer (allgather/alltoall input, joined ranks)
  std::unique_ptr<GpuExecutor> gpu_;  // set once by enable_gpu(), before execute() runs
  telemetry::PhaseObserver* phase_observer_ = nullptr;  // set_phase_observer(); may be null
  std::string backend_name_ = "local";                   // CPU backend's name for telemetry
};

}  // namespace hvrun::detail
