#include "worker_lib/runtime/fast_path.h"

#include "common/logging.h"
#include "common/setting_keys.h"
#include "common/settings.h"
#include "worker_lib/backends/shm/reduce_kernels.h"
#include "worker_lib/reduction/reduction_math.h"

namespace hvrun::detail {

FastPath::FastPath(Context context, shm::RoundBoard* board) : c_(std::move(context)), board_(board) {
  if (board_ == nullptr || c_.world_size < 2) return;
  Settings settings;
  if (Status s = settings.apply_process_environment(); !s.is_ok()) {
    SPDLOG_WARN("fast path off: {}", s.message());
    return;
  }
  if (!settings.get(setting::kFastPath)) {
    SPDLOG_DEBUG("fast path off (--fast-path=false)");
    return;
  }
  wait_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::milli>(settings.get(setting::kFastPathWaitMs)));
  // A rank waiting in a round holds up its own plans meanwhile, so peers in a collective with
  // it wait too: keep that well inside the op timeout.
  const auto longest = std::chrono::duration_cast<std::chrono::nanoseconds>(c_.op_timeout) / 4;
  if (wait_ > longest) {
    SPDLOG_WARN("--fast-path-wait-ms {} is over a quarter of --op-timeout; using {} ms",
                settings.get(setting::kFastPathWaitMs),
                std::chrono::duration_cast<std::chrono::milliseconds>(longest).count());
    wait_ = longest;
  }
  sources_.resize(static_cast<size_t>(c_.world_size));
  enabled_ = true;
}

const CacheEntry* FastPath::entry_for(const FastAllreduce& call) const {
  const CacheEntry* entry = c_.submitter.cache().find(call.name);
  if (entry == nullptr || !entry->fast.response) return nullptr;
  // The coordinator's entry holds only while the metadata is what was cached.
  const PendingOp& m = *entry->metadata;
  if (m.dtype != call.dtype || m.shape != call.shape || m.reduce_op != call.options.op ||
      m.prescale != call.options.prescale || m.postscale != call.options.postscale)
    return nullptr;
  return entry;
}

bool FastPath::idle() {
  std::lock_guard<std::mutex> lock(c_.state.mutex);
  const WorkState& s = c_.state;
  return !s.terminal && !s.abort_reason && !s.stream_ended && !s.stop_requested &&
         s.in_flight.empty() && s.outbox.empty() && s.inbox.empty() &&
         s.plans_received == s.plans_started &&
         // The timeline shows every collective's negotiation: recording takes the slow path.
         !c_.telemetry.recording();
}

std::optional<Status> FastPath::try_allreduce(const FastAllreduce& call) {
  if (!enabled_) return std::nullopt;
  const auto count = static_cast<size_t>(num_elements(call.shape));
  if (count == 0) return std::nullopt;

  std::lock_guard<std::mutex> exec_lock(c_.lane.mutex);
  const CacheEntry* cached = entry_for(call);
  if (cached == nullptr || !idle()) return std::nullopt;
  const uint64_t events = c_.lane.events();
  const auto gen = static_cast<uint32_t>(events);
  const size_t payload_bytes = count * dtype_size(work_dtype(call.dtype));
  const bool inline_payload = payload_bytes <= shm::RoundBoard::kPayloadBytes;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + wait_;
  const AllreduceOptions& o = call.options;

  std::byte* mine = board_->open(gen, inline_payload ? payload_bytes : 0, deadline);
  if (mine == nullptr) {
    board_->release();
    return std::nullopt;
  }
  if (inline_payload) pack_scaled(mine, call.input, count, call.dtype, o.prescale);
  shm::RoundKey key;
  key.words[0] = cached->id | (inline_payload ? 1ull << 32 : 0);
  key.words[1] = cached->fast.signature_hash;
  key.words[2] = events;
  key.words[3] = count;
  key.words[4] = static_cast<uint64_t>(c_.world_size);
  const shm::RoundOutcome outcome = board_->join(gen, key, deadline);
  if (outcome != shm::RoundOutcome::kAgreed) {
    board_->release();
    SPDLOG_DEBUG("fast path: allreduce '{}' goes through the coordinator (round {} {})",
                 call.name, gen, shm::round_outcome_name(outcome));
    return std::nullopt;
  }
  if (!inline_payload) {
    board_->release();
    c_.lane.advance();
    c_.lane.refuse_if_busy();
    auto op = std::make_shared<PendingOp>();
    op->op = v1::COLLECTIVE_OP_ALLREDUCE;
    op->dtype = call.dtype;
    op->shape = call.shape;
    op->reduce_op = o.op;
    op->prescale = o.prescale;
    op->postscale = o.postscale;
    op->input = call.input;
    op->output = call.output;
    op->handle = std::make_shared<HandleState>(call.name);
    const std::string backend = c_.executor.backend_name();
    c_.executor.set_backend_name("shm-fast");
    c_.executor.execute(*cached->fast.response, {op});  // completes the handle
    c_.executor.set_backend_name(backend);
    std::lock_guard<std::mutex> lock(op->handle->mutex);
    return op->handle->status;
  }
  const int size = c_.world_size;
  for (int k = 0; k < size; ++k) sources_[static_cast<size_t>(k)] = board_->payload(k);
  shm::reduce_sources_finished(call.output, nullptr, sources_.data(), size, count, call.dtype,
                               o.op, o.op == ReduceOp::kAverage ? size : 1, o.postscale);
  board_->release();
  c_.lane.advance();
  c_.lane.refuse_if_busy();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now() - start);
  c_.telemetry.add_fast_allreduce(static_cast<uint64_t>(ns.count()),
                                  count * dtype_size(call.dtype));
  return Status::ok();
}

}  // namespace hvrun::detail
