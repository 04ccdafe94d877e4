#include "worker_lib/agreement/request_cache.h"

#include <algorithm>

namespace hvrun::detail {
namespace {

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

ShapeKey::ShapeKey(const std::vector<int64_t>& shape) : rank_(shape.size()) {
  if (rank_ > kInline) long_shape_ = shape;
  else std::copy(shape.begin(), shape.end(), dims_.begin());
}

bool ShapeKey::operator==(const std::vector<int64_t>& shape) const {
  if (shape.size() != rank_) return false;
  if (rank_ > kInline) return long_shape_ == shape;
  return std::equal(shape.begin(), shape.end(), dims_.begin());
}

bool RequestCache::may_run_fast(const PendingOp& op) {
  return op.op == v1::COLLECTIVE_OP_ALLREDUCE && op.group_id == 0 && op.process_set == 0;
}

bool RequestCache::fast_entry_matches(const CacheEntry& entry, DataType dtype,
                                      const std::vector<int64_t>& shape, ReduceOp op,
                                      double prescale, double postscale) {
  return entry.fast && entry.dtype == dtype && entry.reduce_op == op &&
         entry.prescale == prescale && entry.postscale == postscale && entry.shape == shape;
}

std::optional<uint32_t> RequestCache::cached_id(const PendingOp& op) const {
  auto it = entries_.find(op.name());
  if (op.group_id != 0 || it == entries_.end() || it->second.signature != op.cache_signature())
    return std::nullopt;
  return it->second.id;
}

const CacheEntry* RequestCache::round_entry(PendingOp& op) const {
  if (!may_run_fast(op)) return nullptr;
  if (op.cache_entry == nullptr) op.cache_entry = find(op.name());
  const CacheEntry* entry = op.cache_entry;
  if (entry == nullptr || entry->device != op.device ||
      !fast_entry_matches(*entry, op.dtype, op.shape, op.reduce_op, op.prescale, op.postscale))
    return nullptr;
  return entry;
}

const CacheEntry* RequestCache::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

void RequestCache::remember(const v1::Response& response,
                            const std::vector<std::shared_ptr<PendingOp>>& entries) {
  for (int i = 0; i < response.tensors_size(); ++i) {
    uint32_t id = response.tensors(i).cache_id();
    if (id == 0 || !entries[i]) continue;
    const PendingOp& op = *entries[i];
    std::string signature = op.cache_signature();
    auto it = entries_.find(op.name());
    // Unchanged, unless the entry came from a grouped allreduce (same signature, no fast entry)
    // and this one could run fast.
    if (it != entries_.end() && it->second.id == id && it->second.signature == signature &&
        (!may_run_fast(op) || it->second.fast))
      continue;
    entries_[op.name()] = make_entry(id, op, std::move(signature));
  }
}

CacheEntry RequestCache::make_entry(uint32_t id, const PendingOp& op, std::string signature) const {
  CacheEntry entry;
  entry.id = id;
  entry.signature = std::move(signature);
  if (!may_run_fast(op)) return entry;
  entry.fast = true;
  entry.device = op.device;
  entry.dtype = op.dtype;
  entry.reduce_op = op.reduce_op;
  entry.prescale = op.prescale;
  entry.postscale = op.postscale;
  entry.shape = ShapeKey(op.shape);
  entry.signature_hash = fnv1a64(entry.signature);
  return entry;
}

}  // namespace hvrun::detail
