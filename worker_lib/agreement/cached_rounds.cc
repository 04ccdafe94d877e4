#include "worker_lib/agreement/cached_rounds.h"

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "proto/fusion_packing.h"

namespace hvrun::detail {
namespace {

constexpr size_t kWords = (CachedRounds::kMaxCacheId + 1) / 64;
constexpr size_t kBitsBytes = kWords * sizeof(uint64_t);
// words[0] of a cached round's key; a blocking fast call's key holds a cache id below 2^33 there.
constexpr uint64_t kCachedRoundMark = 1ull << 63;

double scale_or_one(double scale) { return scale == 0 ? 1.0 : scale; }

v1::DeviceKind device_kind(const PendingOp& op) {
  return op.device.is_cuda() ? v1::DEVICE_KIND_CUDA : v1::DEVICE_KIND_CPU;
}

// The response header the coordinator's plan builder writes for this allreduce (no joined
// ranks: a rank that joined never takes part in a cached round).
void fill_header(v1::Response& response, const PendingOp& op, int world) {
  response.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
  response.set_dtype(static_cast<v1::DataType>(static_cast<int>(op.dtype)));
  // CUDA: the plan executor gives the response to the GPU executor, as it does a planned one.
  response.set_device(device_kind(op));
  response.set_reduce_op(static_cast<v1::ReduceOp>(static_cast<int>(op.reduce_op)));
  response.set_prescale(scale_or_one(op.prescale));
  response.set_postscale(scale_or_one(op.postscale));
  response.set_root_rank(op.root_rank);
  response.set_contributing_ranks(world);
}

}  // namespace

CachedRounds::CachedRounds(Context context, RoundAgreement* rounds)
    : c_(std::move(context)), rounds_(rounds) {
  enabled_ = rounds_ != nullptr && c_.world_size > 1 && c_.fast_path.rounds_on() &&
             rounds_->payload_capacity() >= kBitsBytes;
}

void CachedRounds::dispatch() {
  if (!enabled_) {
    c_.rank.send_outbox();
    return;
  }
  std::lock_guard<std::mutex> exec_lock(c_.lane.mutex);
  dispatch_locked();
}

void CachedRounds::send_pending() {
  if (enabled_) {
    std::unique_lock<std::mutex> exec_lock(c_.lane.mutex, std::try_to_lock);
    if (exec_lock.owns_lock()) {
      dispatch_locked();
      return;
    }
    // Another thread dispatches: it looks at the outbox again before it lets the lock go (and
    // the background thread, woken by the submission, comes after it).
    if (dispatching_.load(std::memory_order_acquire)) return;
    // A plan still runs (its last handles completed, so this thread went on to its next step).
    // When everything unsent could take a round, wait for the plan rather than send: sent, the
    // ops would refuse the round the other ranks are about to meet in, and each step through
    // the coordinator would end the same way. Anything else (an op no round runs: its plan may
    // hold the lock for a whole collective) goes to the coordinator now, to be negotiated
    // meanwhile.
    if (c_.rank.outbox_may_hold()) {
      exec_lock.lock();
      dispatch_locked();
      return;
    }
  }
  c_.rank.send_pending();
}

void CachedRounds::dispatch_locked() {
  dispatching_.store(true, std::memory_order_release);
  bool done = false;
  while (!done) {
    switch (c_.rank.take_outbox(kMaxCacheId, held_)) {
      case RankState::Taken::kNothing:
        done = true;
        break;
      case RankState::Taken::kTerminal:  // terminate() failed every op in flight, held ones too
        held_.clear();
        done = true;
        break;
      case RankState::Taken::kSend:
        c_.rank.send_held(held_);
        done = true;
        break;
      case RankState::Taken::kHeld:
        if (!run_round()) {
          c_.rank.send_held(held_);
          done = true;
        }
        break;
    }
  }
  dispatching_.store(false, std::memory_order_release);
}

bool CachedRounds::run_round() {
  const uint64_t events = c_.lane.events();
  const auto gen = static_cast<uint32_t>(events);
  const auto deadline = std::chrono::steady_clock::now() + c_.fast_path.wait();
  std::byte* mine = rounds_->open(gen, kBitsBytes, deadline);
  if (mine == nullptr) {
    rounds_->release();
    SPDLOG_DEBUG("cached round {}: could not open; {} ops go to the coordinator", gen,
                 held_.size());
    return false;
  }
  uint64_t ready[kWords] = {};
  for (const Held& h : held_) ready[h.id / 64] |= 1ull << (h.id % 64);
  std::memcpy(mine, ready, kBitsBytes);
  RoundKey key;
  key.words[0] = kCachedRoundMark | kWords;
  key.words[1] = events;
  key.words[2] = static_cast<uint64_t>(c_.fusion_threshold_bytes);
  key.words[3] = static_cast<uint64_t>(c_.world_size);
  const RoundOutcome outcome = rounds_->join(gen, key, deadline);
  if (outcome != RoundOutcome::kAgreed) {
    rounds_->release();
    SPDLOG_DEBUG("cached round {} {}: {} ops go to the coordinator", gen,
                 round_outcome_name(outcome), held_.size());
    return false;
  }
  rounds_->and_payloads(ready, kWords);
  rounds_->release();
  c_.lane.advance();  // every rank saw this round agree

  std::vector<Held> agreed;
  std::vector<Held> kept;
  for (Held& h : held_)
    (((ready[h.id / 64] >> (h.id % 64)) & 1u) != 0 ? agreed : kept).push_back(std::move(h));
  held_ = std::move(kept);
  if (agreed.empty()) {
    SPDLOG_DEBUG("cached round {}: no op ready on every rank; {} ops go to the coordinator", gen,
                 held_.size());
    return false;
  }
  std::sort(agreed.begin(), agreed.end(),
            [](const Held& a, const Held& b) { return a.id < b.id; });
  execute(std::move(agreed));
  c_.lane.refuse_if_busy(c_.rank.waiting_for_coordinator());
  return true;
}

void CachedRounds::execute(std::vector<Held> agreed) {
  if (!c_.rank.start_agreed(agreed)) return;  // already failed (take_outbox drops the rest)
  // The coordinator's fusion (proto/fusion_packing.h), in cache id order: the order in which
  // the coordinator first planned these tensors.
  FusionPacker packer(c_.fusion_threshold_bytes);
  std::vector<FusionKey> keys;
  std::vector<uint64_t> bytes_of;  // one per response: how many there are this round
  for (Held& h : agreed) {
    std::shared_ptr<PendingOp>& op = h.op;
    const FusionKey fusion{v1::COLLECTIVE_OP_ALLREDUCE,
                           static_cast<v1::DataType>(static_cast<int>(op->dtype)),
                           device_kind(*op),
                           static_cast<v1::ReduceOp>(static_cast<int>(op->reduce_op)),
                           scale_or_one(op->prescale), scale_or_one(op->postscale)};
    auto found = std::find(keys.begin(), keys.end(), fusion);
    const auto key = static_cast<int>(found - keys.begin());
    if (found == keys.end()) keys.push_back(fusion);
    const auto bytes = static_cast<int64_t>(num_elements(op->shape)) *
                       static_cast<int64_t>(dtype_size(op->dtype));
    int response = packer.place(key, bytes);
    if (response < 0) {
      response = static_cast<int>(bytes_of.size());
      packer.opened(key, response, bytes);
      if (bytes_of.size() == responses_.size()) {
        responses_.emplace_back();
        entries_.emplace_back();
      }
      v1::Response& opened = responses_[bytes_of.size()];
      opened.Clear();  // keeps its ResponseTensors for add_tensors() to reuse
      fill_header(opened, *op, c_.world_size);
      bytes_of.push_back(0);
    }
    const auto r = static_cast<size_t>(response);
    // No name: this rank's executor reads its own ops (entries), and a round never runs while
    // the timeline (the only reader of a response's names) records.
    v1::ResponseTensor& tensor = *responses_[r].add_tensors();
    tensor.set_cache_id(h.id);
    tensor.mutable_shape()->Assign(op->shape.begin(), op->shape.end());
    bytes_of[r] += static_cast<uint64_t>(bytes);
    entries_[r].push_back(std::move(op));
  }
  for (size_t i = 0; i < bytes_of.size(); ++i) {
    const auto start = telemetry::PhaseClock::now();
    // Timed to its handles' completion: on CUDA tensors that comes after execute() returned.
    c_.executor.execute(responses_[i], entries_[i],
                        [&telemetry = c_.telemetry, start, bytes = bytes_of[i],
                         on_gpu = responses_[i].device() == v1::DEVICE_KIND_CUDA](auto end) {
                          telemetry.on_fast_collective(v1::COLLECTIVE_OP_ALLREDUCE, start, end,
                                                       bytes, on_gpu);
                        });
    entries_[i].clear();  // the ops end here, as they did when the entries were the round's own
  }
}

}  // namespace hvrun::detail
