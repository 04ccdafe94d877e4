#include "worker_lib/agreement/fast_path.h"

#include <algorithm>

#include "common/logging.h"
#include "worker_lib/reduction/reduction_math.h"

namespace hvrun::detail {

std::chrono::nanoseconds round_wait(const FastPathConfig& settings,
                                    std::chrono::milliseconds op_timeout) {
  return std::min(std::chrono::duration_cast<std::chrono::nanoseconds>(settings.wait),
                  std::chrono::duration_cast<std::chrono::nanoseconds>(op_timeout) / 4);
}

FastPath::FastPath(Context context, RoundAgreement* rounds)
    : c_(std::move(context)), rounds_(rounds) {
  if (rounds_ == nullptr || c_.world_size < 2) return;
  if (!c_.settings.enabled) {
    SPDLOG_DEBUG("fast path off (--fast-path=false)");
    return;
  }
  wait_ = round_wait(c_.settings, c_.op_timeout);
  if (wait_ < c_.settings.wait)
    SPDLOG_WARN("--fast-path-wait-ms {} is over a quarter of --op-timeout; using {} ms",
                c_.settings.wait.count(),
                std::chrono::duration_cast<std::chrono::milliseconds>(wait_).count());
  rounds_on_ = true;
  payloads_ = rounds_->payloads();
  if (payloads_ == nullptr)
    SPDLOG_DEBUG("blocking fast path: agreed across hosts, every call through the data plane");
}

const CacheEntry* FastPath::entry_for(const FastAllreduce& call) const {
  const CacheEntry* entry = c_.rank.negotiated().find(call.name);
  // The coordinator's entry holds only while the metadata is what was cached, for host memory
  // (a CUDA tensor's entry is the cached rounds' alone).
  if (entry == nullptr || entry->device.is_cuda() ||
      !RequestCache::fast_entry_matches(*entry, call.dtype, call.shape, call.options.op,
                                        call.options.prescale, call.options.postscale))
    return nullptr;
  return entry;
}

std::optional<Status> FastPath::try_allreduce(const FastAllreduce& call) {
  if (!rounds_on_) return std::nullopt;
  const auto count = static_cast<size_t>(num_elements(call.shape));
  if (count == 0) return std::nullopt;

  std::lock_guard<std::mutex> exec_lock(c_.lane.mutex);
  const CacheEntry* cached = entry_for(call);
  if (cached == nullptr || !c_.rank.idle()) return std::nullopt;
  const uint64_t events = c_.lane.events();
  const auto gen = static_cast<uint32_t>(events);
  const size_t payload_bytes = count * dtype_size(work_dtype(call.dtype));
  // Across hosts only the agreement crosses (no payloads): the data plane moves every byte.
  const bool inline_payload = payloads_ != nullptr && payload_bytes <= rounds_->payload_capacity();
  const auto start = telemetry::PhaseClock::now();
  const auto deadline = start + wait_;
  const AllreduceOptions& o = call.options;

  // Every way out from here on was blocked on the peers (blocked_time.h).
  BlockedTime& blocked = c_.telemetry.blocked_time();
  std::byte* mine = rounds_->open(gen, inline_payload ? payload_bytes : 0, deadline);
  if (mine == nullptr) {
    rounds_->release();
    blocked.add(start, telemetry::PhaseClock::now());
    return std::nullopt;
  }
  if (inline_payload) pack_scaled(mine, call.input, count, call.dtype, o.prescale);
  RoundKey key;
  key.words[0] = cached->id | (inline_payload ? 1ull << 32 : 0);
  key.words[1] = cached->signature_hash;
  key.words[2] = events;
  key.words[3] = count;
  key.words[4] = static_cast<uint64_t>(c_.world_size);
  const RoundOutcome outcome = rounds_->join(gen, key, deadline);
  if (outcome != RoundOutcome::kAgreed) {
    rounds_->release();
    blocked.add(start, telemetry::PhaseClock::now());
    SPDLOG_DEBUG("fast path: allreduce '{}' goes through the coordinator (round {} {})",
                 call.name, gen, round_outcome_name(outcome));
    return std::nullopt;
  }
  const int divisor = o.op == ReduceOp::kAverage ? c_.world_size : 1;
  // Recorded once agreed: a round that falls back is recorded by the submission that follows.
  const uint64_t flight =
      c_.recorder == nullptr
          ? 0
          : c_.recorder->submitted_running(call.name, v1::COLLECTIVE_OP_ALLREDUCE, call.dtype,
                                           count * dtype_size(call.dtype), 0,
                                           FlightRecorder::Runner::kFastPath);
  if (!inline_payload) {
    rounds_->release();
    c_.lane.advance();
    c_.lane.refuse_if_busy(c_.rank.waiting_for_coordinator());
    // Scale factors as a planned response carries them (0 = unset = 1).
    Status status = c_.executor.fast_allreduce(TensorAllreduce{
        .tensor = {call.input, call.output, count},
        .dtype = call.dtype,
        .op = o.op,
        .scaling = {.prescale = o.prescale == 0 ? 1.0 : o.prescale,
                    .postscale = o.postscale == 0 ? 1.0 : o.postscale,
                    .divisor = divisor}});
    blocked.add(start, telemetry::PhaseClock::now());
    if (c_.recorder != nullptr) c_.recorder->ended(flight, status.is_ok());
    if (status.is_ok()) return status;
    status = c_.rank.explain_failure(std::move(status));
    SPDLOG_ERROR("{}", status.message());
    return status;
  }
  payloads_->reduce_payloads(call.output, count, call.dtype, o.op, divisor, o.postscale);
  rounds_->release();
  if (c_.recorder != nullptr) c_.recorder->ended_untimed(flight, true);
  c_.lane.advance();
  c_.lane.refuse_if_busy(c_.rank.waiting_for_coordinator());
  const auto end = telemetry::PhaseClock::now();
  c_.telemetry.on_fast_collective(v1::COLLECTIVE_OP_ALLREDUCE, start, end,
                                  count * dtype_size(call.dtype), /*on_gpu=*/false);
  blocked.add(start, end);
  return Status::ok();
}

}  // namespace hvrun::detail
