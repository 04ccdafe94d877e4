// Executes responses on CPU tensors through the backend (worker_lib/backend.h). Allreduce and
// reducescatter hand the backend the tensors themselves (Backend::allreduce_pieces): the shm
// backend reduces straight from and into them, others pack into the fusion buffer. The other
// collectives pack / run / unpack here. Joined ranks (no local tensor) take part with neutral
// data so nobody waits for them.
//
// Threads: under the runtime's executor lock (the background thread's plans, or an API
// thread's fast-path collective). The fusion buffers are members and reused from one response
// to the next (they grow, never shrink, during a job).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "worker_lib/backend.h"
#include "worker_lib/execution/executor.h"
#include "worker_lib/telemetry/phase_observer.h"

namespace hvrun::detail {

// One allreduce of a caller's own tensor (not a response of a plan).
struct TensorAllreduce {
  ReducePiece tensor;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // Average reduces as a Sum divided by scaling.divisor
  ReduceScaling scaling;
};

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(Backend& backend, int rank, int size) : backend_(backend), rank_(rank), size_(size) {}

  Status execute(const v1::Response& response, const ResponseEntries& entries) override;
  void abort(const std::string& reason) override { backend_.abort(reason); }

  // An allreduce every rank agreed to run next without the coordinator (the fast path), which
  // telemetry counts as such (PhaseObserver::on_fast_collective), not as the backend's.
  Status fast_allreduce(const TensorAllreduce& call);

  // Telemetry: told about every pack / collective / unpack phase from now on; null = off.
  // `backend_name` names the backend in reports. Call before the first execute(); the observer
  // outlives the executor.
  void set_phase_observer(telemetry::PhaseObserver* observer, std::string backend_name) {
    phase_observer_ = observer;
    backend_name_ = std::move(backend_name);
  }

  // Bytes currently held by the reused buffers (for tests and metrics).
  size_t buffer_capacity() const { return fusion_.capacity() + scratch_.capacity(); }

 private:
  Status allreduce(const v1::Response& r, const ResponseEntries& e);
  Status reducescatter(const v1::Response& r, const ResponseEntries& e);
  Status allgather(const v1::Response& r, const ResponseEntries& e);
  Status broadcast(const v1::Response& r, const ResponseEntries& e);
  Status alltoall(const v1::Response& r, const ResponseEntries& e);

  // allreduce/reducescatter: pieces_ <- one piece per tensor of `r` (joined: no input/output).
  Status pieces_of(const v1::Response& r, const ResponseEntries& e);
  // Reduces pieces_ as one fused allreduce (Backend::allreduce_pieces), with r's op and scaling.
  Status reduce_pieces(const v1::Response& r);
  std::byte* reserve(std::vector<std::byte>& buffer, size_t bytes);
  int contributors(const v1::Response& r) const;

  Backend& backend_;
  int rank_;
  int size_;
  std::vector<std::byte> fusion_;    // reused across responses (backends that pack stage here)
  std::vector<ReducePiece> pieces_;  // reused: the current allreduce's tensors
  std::vector<std::byte> scratch_;   // reused: second buffer (allgather/alltoall input, joined ranks)
  telemetry::PhaseObserver* phase_observer_ = nullptr;  // set_phase_observer(); may be null
  std::string backend_name_ = "local";                   // the backend's name for telemetry
};

}  // namespace hvrun::detail
