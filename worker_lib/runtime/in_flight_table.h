// The ops in flight, by name, and for a name submitted again and again (a training step's
// tensors), the last op of that name kept for the next submission: its PendingOp, HandleState,
// name and shape are reset and reused instead of allocated anew, once nothing else holds them
// (the caller dropped its Handle). A step's 161 submissions then allocate nothing, and the
// objects they touch are the same from step to step.
//
// Threads: guarded by WorkState::mutex, like the rest of WorkState.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "worker_lib/execution/pending_op.h"

namespace hvrun::detail {

// One name's entry of the table.
struct InFlightSlot {
  std::shared_ptr<PendingOp> op;     // in flight, or null
  std::shared_ptr<PendingOp> spare;  // the latest claimed op of this name, for the next claim
};

class InFlightTable {
 public:
  // Registers `op` as in flight; false when an op of its name is in flight already. Only ops
  // from claim() are kept for reuse.
  bool add(const std::shared_ptr<PendingOp>& op);
  // For a submission of `name`: the op to fill, already in flight, or null when an op of that
  // name is in flight. The last op of that name when nothing else holds it or its handle
  // (reset: it keeps only its handle's name and its vectors' capacity), else a new one.
  std::shared_ptr<PendingOp> claim(std::string_view name);
  bool contains(std::string_view name) const;
  size_t size() const { return in_flight_; }  // ops in flight
  size_t slots() const { return slots_.size(); }  // names known, in flight or not
  bool empty() const { return in_flight_ == 0; }
  // The in-flight op of that name on process set `set`, no longer in flight; null when there is
  // none (or it runs on another set).
  std::shared_ptr<PendingOp> take(std::string_view name, uint32_t set);
  // `op` is no longer in flight (nothing when it is not in flight).
  void remove(PendingOp& op);
  // Every op in flight, none left in flight (the runtime's end).
  std::vector<std::shared_ptr<PendingOp>> take_all();

 private:
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Slot = InFlightSlot;
  using Slots = std::unordered_map<std::string, Slot, NameHash, std::equal_to<>>;

  Slot& slot_for(std::string_view name);
  // Slots live in the map's nodes, which stay put until erased: a slot's address identifies it
  // while its op is in flight (PendingOp::in_flight_slot).
  void ended(Slot& slot);
  // Names seen once (generated ones) would otherwise accumulate: past this many slots (or twice
  // the ops in flight), the idle ones are dropped.
  static constexpr size_t kMaxSlots = 8192;

  Slots slots_;
  size_t in_flight_ = 0;
};

}  // namespace hvrun::detail
