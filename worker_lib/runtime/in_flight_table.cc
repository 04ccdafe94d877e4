#include "worker_lib/runtime/in_flight_table.h"

#include <algorithm>
#include <atomic>

namespace hvrun::detail {
namespace {

// Whether this thread is the only holder of `op` and of its handle: no caller can see either
// any more, so both may be reset.
bool only_holder(const std::shared_ptr<PendingOp>& op) {
  if (!op || op.use_count() != 1 || !op->handle || op->handle.use_count() != 1) return false;
  // The last other holder's release happened before: its writes are visible from here on.
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

void reset(PendingOp& op) {
  std::shared_ptr<HandleState> handle = std::move(op.handle);
  std::vector<int64_t> shape = std::move(op.shape);
  std::vector<int64_t> splits = std::move(op.splits);
  const CacheEntry* cache_entry = op.cache_entry;  // the same name's entry
  shape.clear();
  splits.clear();
  op = PendingOp{};
  op.handle = std::move(handle);
  op.shape = std::move(shape);
  op.splits = std::move(splits);
  op.cache_entry = cache_entry;
  op.handle->reset_for_reuse();
}

}  // namespace

InFlightTable::Slot& InFlightTable::slot_for(std::string_view name) {
  auto it = slots_.find(name);
  if (it != slots_.end()) return it->second;
  // Past the bound, at least half the slots are idle, so a sweep frees at least half of them.
  if (slots_.size() >= std::max(kMaxSlots, 2 * in_flight_))
    std::erase_if(slots_, [](const auto& s) { return !s.second.op; });
  return slots_.emplace(std::string(name), Slot{}).first->second;
}

bool InFlightTable::add(const std::shared_ptr<PendingOp>& op) {
  // Not kept for reuse: only claimed ops are (an allgather's handle holds its result, which
  // must go when the caller drops the handle).
  Slot& slot = slot_for(op->name());
  if (slot.op) return false;
  slot.op = op;
  op->in_flight_slot = &slot;
  ++in_flight_;
  return true;
}

std::shared_ptr<PendingOp> InFlightTable::claim(std::string_view name) {
  Slot& slot = slot_for(name);
  if (slot.op) return nullptr;
  if (only_holder(slot.spare)) reset(*slot.spare);
  else slot.spare = PendingOp::named(std::string(name));
  slot.op = slot.spare;
  slot.op->in_flight_slot = &slot;
  ++in_flight_;
  return slot.op;
}

bool InFlightTable::contains(std::string_view name) const {
  auto it = slots_.find(name);
  return it != slots_.end() && it->second.op;
}

void InFlightTable::ended(Slot& slot) {
  slot.op->in_flight_slot = nullptr;
  slot.op.reset();
  --in_flight_;
}

std::shared_ptr<PendingOp> InFlightTable::take(std::string_view name, uint32_t set) {
  auto it = slots_.find(name);
  if (it == slots_.end() || !it->second.op || it->second.op->process_set != set) return nullptr;
  std::shared_ptr<PendingOp> op = it->second.op;
  ended(it->second);
  return op;
}

void InFlightTable::remove(PendingOp& op) {
  // Set only while the op is in flight, so its slot cannot have been swept.
  if (Slot* slot = op.in_flight_slot; slot != nullptr && slot->op.get() == &op) ended(*slot);
}

std::vector<std::shared_ptr<PendingOp>> InFlightTable::take_all() {
  std::vector<std::shared_ptr<PendingOp>> ops;
  for (auto& [name, slot] : slots_) {
    if (!slot.op) continue;
    slot.op->in_flight_slot = nullptr;
    ops.push_back(std::move(slot.op));
  }
  in_flight_ = 0;
  return ops;
}

}  // namespace hvrun::detail
