#include "worker_lib/execution/plan_executor.h"

#include "common/logging.h"

namespace hvrun::detail {

void PlanExecutor::record_ended(const ResponseEntries& entries, bool ok) const {
  if (recorder_ == nullptr) return;
  const int64_t now = FlightRecorder::now_us();
  for (const auto& e : entries)
    if (e) recorder_->ended(e->flight_sequence, ok, now);
}

void PlanExecutor::execute(const v1::Response& response, const ResponseEntries& entries,
                           Finished finished) {
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
      if (response.device() == v1::DEVICE_KIND_CUDA) {
        execute_on_gpu(response, entries, std::move(finished));
        return;
      }
      status = cpu_.execute(response, entries);
  }
  complete(response.joined_ranks(), entries, std::move(status));
  if (finished) finished(telemetry::PhaseClock::now());
}

void PlanExecutor::complete(const google::protobuf::RepeatedField<int32_t>& joined_ranks,
                            const ResponseEntries& entries, Status status) const {
  if (!status.is_ok() && explain_) status = explain_(std::move(status));
  if (!status.is_ok()) SPDLOG_ERROR("{}", status.message());
  record_ended(entries, status.is_ok());
  for (const auto& e : entries) {
    if (!e) continue;
    e->handle->joined_ranks.assign(joined_ranks.begin(), joined_ranks.end());
    e->handle->complete(status);
  }
}

void PlanExecutor::execute_on_gpu(const v1::Response& r, const ResponseEntries& e,
                                  Finished finished) {
  if (!gpu_) {
    complete(r.joined_ranks(), e,
             failed_precondition("response on CUDA tensors but this worker has no GPU data plane "
                                 "(PlanExecutor::set_gpu_executor was not called)"));
    if (finished) finished(telemetry::PhaseClock::now());
    return;
  }
  // NCCL packs, reduces and unpacks on its stream: one collective phase for the whole, from
  // queuing to the GPU's end.
  struct Phase {
    v1::CollectiveOp op;
    int tensors;
    std::string first_name;  // the response may be gone when the phase ends
    telemetry::PhaseClock::time_point start;
    uint64_t bytes = 0;
  };
  std::shared_ptr<Phase> phase;
  if (phase_observer_) {
    const telemetry::ResponseGist gist = telemetry::ResponseGist::of(r);
    phase = std::make_shared<Phase>(Phase{gist.op, gist.tensors, std::string(gist.first_name),
                                          telemetry::PhaseClock::now(), local_bytes(r, e)});
  }
  auto finish = [this, joined = r.joined_ranks(), entries = e, phase,
                 finished = std::move(finished)](Status status) {
    const auto end = telemetry::PhaseClock::now();
    if (phase)
      phase_observer_->on_phase(telemetry::ResponseGist{phase->op, phase->tensors, phase->first_name},
                                telemetry::Phase::kCollective, phase->start, end, phase->bytes,
                                "nccl");
    complete(joined, entries, std::move(status));
    if (finished) finished(end);
  };
  if (gpu_asynchronous_) {
    gpu_->execute_then(r, e, std::move(finish));
  } else {
    finish(gpu_->execute(r, e));
  }
}

}  // namespace hvrun::detail
