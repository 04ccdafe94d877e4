// This rank's copy of the coordinator's response cache: for each tensor name, the cache id the
// coordinator assigned and the metadata it was assigned for. A request whose metadata is
// unchanged goes as its id alone; an allreduce (of a CPU or a CUDA tensor) also keeps what the
// steady state needs to run it without the coordinator (the response to execute, a hash for the
// ranks to compare).
//
// Threads: written while executing a plan (the executor's lock and the sender's lock both
// held), so holding either one is enough to read it (runtime.h's lock order).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hvrun.pb.h"
#include "worker_lib/execution/pending_op.h"

namespace hvrun::detail {

// A shape held inline up to four dimensions (every tensor of the usual models): comparing it
// with a request's reads no memory beyond the entry, which a step's 161 lookups find cold.
class ShapeKey {
 public:
  ShapeKey() = default;
  explicit ShapeKey(const std::vector<int64_t>& shape);
  bool operator==(const std::vector<int64_t>& shape) const;

 private:
  static constexpr size_t kInline = 4;
  size_t rank_ = 0;
  std::array<int64_t, kInline> dims_{};
  std::vector<int64_t> long_shape_;  // the whole shape, when it has more than kInline dimensions
};

struct CacheEntry {
  uint32_t id = 0;
  // An allreduce the steady state may run: the metadata it was cached for (what the fast path
  // and the cached rounds compare a call with) and a hash of `signature`. False and 0 for every
  // other op. `device` tells the CPU tensors (the blocking fast path's and the rounds') from the
  // CUDA ones (the rounds' only: the blocking fast path reduces host memory).
  bool fast = false;
  Device device;
  DataType dtype = DataType::kUInt8;
  ReduceOp reduce_op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  ShapeKey shape;
  uint64_t signature_hash = 0;
  std::string signature;
};

class RequestCache {
 public:
  // Whether an op of this kind may run without the coordinator once cached: an allreduce of a
  // CPU or CUDA tensor outside a group, on the global set (the entries marked fast).
  static bool may_run_fast(const PendingOp& op);
  // Whether an allreduce with this metadata is what `entry` cached for the fast path, so its
  // id still stands for it.
  static bool fast_entry_matches(const CacheEntry& entry, DataType dtype,
                                 const std::vector<int64_t>& shape, ReduceOp op, double prescale,
                                 double postscale);
  // The entry `op` may run by agreement with (cached_rounds.h): an op the steady state may run,
  // cached with its metadata and device unchanged; null otherwise. Keeps the entry in the op
  // (PendingOp::cache_entry), so a step's later rounds look nothing up.
  const CacheEntry* round_entry(PendingOp& op) const;
  // The id to send instead of `op`'s full request, when the coordinator cached it unchanged.
  std::optional<uint32_t> cached_id(const PendingOp& op) const;
  // Records the ids `response` assigned to this rank's ops (entries as in PlanExecutor).
  void remember(const v1::Response& response,
                const std::vector<std::shared_ptr<PendingOp>>& entries);
  const CacheEntry* find(const std::string& name) const;

 private:
  CacheEntry make_entry(uint32_t id, const PendingOp& op, std::string signature) const;

  // Never erased, and a name's entry is rewritten in place (the map's nodes stay put): ops keep
  // a pointer to their name's entry across steps (PendingOp::cache_entry).
  std::unordered_map<std::string, CacheEntry> entries_;
};

}  // namespace hvrun::detail
