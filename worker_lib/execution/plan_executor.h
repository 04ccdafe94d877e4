// Executes one Response of the coordinator's plan and completes its handles: barriers and joins
// here, data-moving responses through the executor for the response's device (executor.h): the
// CPU executor over the backend, or the GPU executor once one is set.
//
// Threads: execute() runs under the runtime's executor lock; abort() from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "worker_lib/backend.h"
#include "worker_lib/execution/cpu_executor.h"
#include "worker_lib/execution/executor.h"
#include "worker_lib/autopsy/flight_recorder.h"
#include "worker_lib/telemetry/phase_observer.h"

namespace hvrun::detail {

class PlanExecutor {
 public:
  PlanExecutor(Backend& backend, int rank, int size) : cpu_(backend, rank, size) {}
  // The GPU executor goes first: responses it still runs finish while what they use is here.
  ~PlanExecutor() { gpu_.reset(); }

  // Called with when a response's handles completed (the fast path's telemetry times it).
  using Finished = std::function<void(telemetry::PhaseClock::time_point end)>;
  // Completes every non-null entry's handle (entries as in executor.h): before returning, or,
  // for a response on CUDA tensors, once the GPU finished it (the GPU executor's thread; the
  // call returns when the work is queued). `finished` (optional) is then called too.
  void execute(const v1::Response& response, const ResponseEntries& entries,
               Finished finished = nullptr);

  // Called with a failed collective's status before the handles complete; returns the status
  // they get (the runtime waits briefly for the coordinator's JobAbort, whose reason names the
  // dead rank, instead of the data plane's "connection reset").
  void set_failure_explainer(std::function<Status(Status)> explain) { explain_ = std::move(explain); }

  // Responses on CUDA tensors go to `gpu` (the NCCL data plane, backends/nccl/gpu_executor.h);
  // without one they fail with a message saying so. Call before the first execute().
  // `asynchronous`: execute() returns once the work is queued and the handles complete when the
  // GPU finished it (the global set's); otherwise execute() waits for the GPU (the other
  // process sets': their communicators must not run beside the global one's, which NCCL does
  // not promise to make progress together, so the plan runner drains the global one first).
  void set_gpu_executor(std::unique_ptr<Executor> gpu, bool asynchronous = true) {
    gpu_ = std::move(gpu);
    gpu_asynchronous_ = asynchronous;
  }
  // Returns once every CUDA response this executor left running has finished.
  void drain_gpu() {
    if (gpu_) gpu_->drain();
  }

  // Any thread: every data plane's operation in progress and every later one fail with kAborted.
  void abort(const std::string& reason) {
    cpu_.abort(reason);
    if (gpu_) gpu_->abort(reason);
  }

  // Telemetry (worker_lib/telemetry/phase_observer.h): every phase from now on; null = off.
  // `backend_name` names the CPU backend in reports. Call before the first execute().
  void set_phase_observer(telemetry::PhaseObserver* observer, std::string backend_name) {
    phase_observer_ = observer;
    cpu_.set_phase_observer(observer, std::move(backend_name));
  }

  // The flight recorder (worker_lib/autopsy/flight_recorder.h) hears every response's start and
  // end from now on; null = off. Call before the first execute().
  void set_flight_recorder(FlightRecorder* recorder) { recorder_ = recorder; }
  // Records the end of responses completed without execute() (errors, process-set changes).
  void record_ended(const ResponseEntries& entries, bool ok) const;

  CpuExecutor& cpu() { return cpu_; }
  // Bytes currently held by the reused buffers (for tests and metrics).
  size_t buffer_capacity() const { return cpu_.buffer_capacity(); }

 private:
  void execute_on_gpu(const v1::Response& r, const ResponseEntries& e, Finished finished);
  // The handles get `status` (explained first when it is a failure).
  void complete(const google::protobuf::RepeatedField<int32_t>& joined_ranks,
                const ResponseEntries& entries, Status status) const;

  CpuExecutor cpu_;
  std::unique_ptr<Executor> gpu_;  // set once before execute() runs; may be null
  bool gpu_asynchronous_ = true;
  std::function<Status(Status)> explain_;
  telemetry::PhaseObserver* phase_observer_ = nullptr;
  FlightRecorder* recorder_ = nullptr;
};

}  // namespace hvrun::detail
