// The fast path (issue 11's small-op latency): a blocking allreduce runs on the caller's thread,
// agreed through the shared-memory round board instead of negotiated by the coordinator. Why
// it is safe, step by step (runtime.h, 7.; backends/shm/round_board.h):
//  - Only when this rank is idle: nothing in flight or unsent, every received plan executed,
//    checked under exec_mutex_ (held until the collective ran). Idle ranks have executed the
//    same plans, because every plan holds an op of every rank; so their events_ agree and they
//    meet in the same round.
//  - The round runs only if every rank arrived with the same key (tensor's cache id, metadata
//    hash, events_, size): the same collective, between the same two plans, on every rank. A
//    plan arriving meanwhile waits for exec_mutex_, so it runs after the fast collective on
//    every rank alike.
//  - Otherwise every rank sees the same failed or disagreeing round and submits the call to the
//    coordinator, which handles it as before (errors, joins, stalls). A rank that submits
//    anything refuses its current round, so peers waiting in it fall back at once.
// Small tensors (up to RoundBoard::kPayloadBytes in their work type) travel inside the round:
// one synchronisation in all, reduced with the shm backend's kernels in the same order as its
// latency path, so the bits equal the coordinator path's. Larger ones run through the executor
// (the shm backend's allreduce) once agreed.
#include <chrono>

#include "common/logging.h"
#include "common/setting_keys.h"
#include "common/settings.h"
#include "worker_lib/backends/shm/reduce_kernels.h"
#include "worker_lib/backends/shm/round_board.h"
#include "worker_lib/runtime/reduction_math.h"
#include "worker_lib/runtime/runtime.h"

namespace hvrun::detail {
namespace {

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

void Runtime::enable_fast_path() {
  shm::RoundBoard* board = backend_->round_board();
  if (board == nullptr || topology_.size < 2) return;
  // Refusals go to the board even with the fast path off here: a peer whose setting differs
  // then falls back at once instead of at its deadline.
  board_ = board;
  Settings settings;
  if (Status s = settings.apply_process_environment(); !s.is_ok()) {
    SPDLOG_WARN("fast path off: {}", s.message());
    return;
  }
  if (!settings.get(setting::kFastPath)) {
    SPDLOG_DEBUG("fast path off (--fast-path=false)");
    return;
  }
  fast_wait_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::milli>(settings.get(setting::kFastPathWaitMs)));
  // A rank waiting in a round holds up its own plans meanwhile, so peers in a collective with
  // it wait too: keep that well inside the op timeout.
  const auto longest = std::chrono::duration_cast<std::chrono::nanoseconds>(config_.op_timeout) / 4;
  if (fast_wait_ > longest) {
    SPDLOG_WARN("--fast-path-wait-ms {} is over a quarter of --op-timeout; using {} ms",
                settings.get(setting::kFastPathWaitMs),
                std::chrono::duration_cast<std::chrono::milliseconds>(longest).count());
    fast_wait_ = longest;
  }
  fast_sources_.resize(static_cast<size_t>(topology_.size));
  fast_enabled_ = true;
}

Runtime::CacheEntry Runtime::make_cache_entry(uint32_t id, const PendingOp& op,
                                              std::string signature) const {
  CacheEntry entry{id, std::move(signature), nullptr, {}};
  if (op.op != v1::COLLECTIVE_OP_ALLREDUCE || op.device.is_cuda() || op.group_id != 0)
    return entry;
  // The op's metadata only: no buffers, no handle (the entry outlives the call).
  auto metadata = std::make_shared<PendingOp>(op);
  metadata->input = nullptr;
  metadata->output = nullptr;
  metadata->stream = nullptr;
  metadata->handle = nullptr;
  auto response = std::make_shared<v1::Response>();
  response->set_op(v1::COLLECTIVE_OP_ALLREDUCE);
  response->set_dtype(static_cast<v1::DataType>(op.dtype));
  response->set_device(v1::DEVICE_KIND_CPU);
  response->set_reduce_op(static_cast<v1::ReduceOp>(op.reduce_op));
  response->set_prescale(op.prescale);
  response->set_postscale(op.postscale);
  response->set_contributing_ranks(topology_.size);
  v1::ResponseTensor* tensor = response->add_tensors();
  tensor->set_name(op.name());
  tensor->set_cache_id(id);
  for (int64_t d : op.shape) tensor->add_shape(d);
  entry.metadata = std::move(metadata);
  entry.fast = FastEntry{std::move(response), fnv1a64(entry.signature)};
  return entry;
}

const Runtime::CacheEntry* Runtime::fast_entry(const FastAllreduce& call) const {
  auto it = cache_.find(call.name);
  if (it == cache_.end() || !it->second.fast.response) return nullptr;
  // The coordinator's entry holds only while the metadata is what was cached.
  const PendingOp& m = *it->second.metadata;
  if (m.dtype != call.dtype || m.shape != call.shape || m.reduce_op != call.options.op ||
      m.prescale != call.options.prescale || m.postscale != call.options.postscale)
    return nullptr;
  return &it->second;
}

bool Runtime::idle_for_fast_path() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !terminal_ && !abort_reason_ && !stream_ended_ && !stop_requested_ &&
         in_flight_.empty() && outbox_.empty() && inbox_.empty() &&
         plans_received_ == plans_started_ &&
         // The timeline shows every collective's negotiation: recording takes the slow path.
         !(telemetry_ && telemetry_->recording());
}

void Runtime::refuse_fast_round() {
  if (board_) board_->refuse(static_cast<uint32_t>(events_.load()));
}

void Runtime::refuse_if_busy() {
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    busy = !in_flight_.empty() || !outbox_.empty();
  }
  if (busy) refuse_fast_round();
}

std::optional<Status> Runtime::try_fast_allreduce(const FastAllreduce& call) {
  if (!fast_enabled_) return std::nullopt;
  const auto count = static_cast<size_t>(num_elements(call.shape));
  if (count == 0) return std::nullopt;

  std::lock_guard<std::mutex> exec_lock(exec_mutex_);
  const CacheEntry* cached = fast_entry(call);
  if (cached == nullptr || !idle_for_fast_path()) return std::nullopt;
  const uint64_t events = events_.load();
  const auto gen = static_cast<uint32_t>(events);
  const size_t payload_bytes = count * dtype_size(work_dtype(call.dtype));
  const bool inline_payload = payload_bytes <= shm::RoundBoard::kPayloadBytes;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + fast_wait_;
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
  key.words[4] = static_cast<uint64_t>(topology_.size);
  const shm::RoundOutcome outcome = board_->join(gen, key, deadline);
  if (outcome != shm::RoundOutcome::kAgreed) {
    board_->release();
    SPDLOG_DEBUG("fast path: allreduce '{}' goes through the coordinator (round {} {})",
                 call.name, gen, shm::round_outcome_name(outcome));
    return std::nullopt;
  }
  if (!inline_payload) {
    board_->release();
    events_.fetch_add(1);
    refuse_if_busy();
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
    const std::string backend = executor_->backend_name();
    executor_->set_backend_name("shm-fast");
    executor_->execute(*cached->fast.response, {op});  // completes the handle
    executor_->set_backend_name(backend);
    std::lock_guard<std::mutex> lock(op->handle->mutex);
    return op->handle->status;
  }
  const int size = topology_.size;
  for (int k = 0; k < size; ++k) fast_sources_[static_cast<size_t>(k)] = board_->payload(k);
  shm::reduce_sources_finished(call.output, nullptr, fast_sources_.data(), size, count,
                               call.dtype, o.op, o.op == ReduceOp::kAverage ? size : 1,
                               o.postscale);
  board_->release();
  events_.fetch_add(1);
  refuse_if_busy();
  if (telemetry_) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start);
    telemetry_->add_fast_allreduce(static_cast<uint64_t>(ns.count()),
                                   count * dtype_size(call.dtype));
  }
  return Status::ok();
}

}  // namespace hvrun::detail
