#include "worker_lib/execution/plan_executor.h"

#include "common/logging.h"

namespace hvrun::detail {

void PlanExecutor::record_ended(const ResponseEntries& entries, bool ok) const {
  if (recorder_ == nullptr) return;
  const int64_t now = FlightRecorder::now_us();
  for (const auto& e : entries)
    if (e) recorder_->ended(e->flight_sequence, ok, now);
}

void PlanExecutor::execute(const v1::Response& response, const ResponseEntries& entries) {
  if (recorder_ != nullptr) {
    const bool moves_data =
        response.op() != v1::COLLECTIVE_OP_BARRIER && response.op() != v1::COLLECTIVE_OP_JOIN;
    const auto runner = !moves_data ? FlightRecorder::Runner::kNone
                        : response.device() == v1::DEVICE_KIND_CUDA
                            ? FlightRecorder::Runner::kGpu
                            : FlightRecorder::Runner::kCpuBackend;
    const int64_t now = FlightRecorder::now_us();
    for (const auto& e : entries)
      if (e) recorder_->started(e->flight_sequence, runner, now);
  }
  Status status;
  switch (response.op()) {
    case v1::COLLECTIVE_OP_BARRIER:
      break;
    case v1::COLLECTIVE_OP_JOIN:
      for (const auto& e : entries)
        if (e) e->handle->join_result = response.last_joined_rank();
      break;
    default:
      status = response.device() == v1::DEVICE_KIND_CUDA ? execute_on_gpu(response, entries)
                                                         : cpu_.execute(response, entries);
  }
  if (!status.is_ok() && explain_) status = explain_(std::move(status));
  if (!status.is_ok()) SPDLOG_ERROR("{}", status.message());
  record_ended(entries, status.is_ok());
  for (const auto& e : entries) {
    if (!e) continue;
    e->handle->joined_ranks.assign(response.joined_ranks().begin(), response.joined_ranks().end());
    e->handle->complete(status);
  }
}

Status PlanExecutor::execute_on_gpu(const v1::Response& r, const ResponseEntries& e) {
  if (!gpu_)
    return failed_precondition("response on CUDA tensors but this worker has no GPU data plane "
                               "(PlanExecutor::set_gpu_executor was not called)");
  // NCCL packs, reduces and unpacks on its stream: one collective phase for the whole.
  telemetry::ScopedPhase collective(phase_observer_, r, telemetry::Phase::kCollective,
                                    phase_observer_ ? local_bytes(r, e) : 0, "nccl");
  return gpu_->execute(r, e);
}

}  // namespace hvrun::detail
