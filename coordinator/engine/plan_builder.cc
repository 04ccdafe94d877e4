// Turning ready tensors into the next plan: which are due (cycle time, lone-tensor rule), fusion
// into responses, error messages, cache ids (see negotiation_engine.h, steps 3-7).
#include <algorithm>
#include <map>

#include "coordinator/engine/engine_state.h"
#include "proto/fusion_packing.h"

namespace hvrun::coordinator {

using engine::PendingTensor;
using engine::TensorMeta;
using TimePoint = NegotiationEngine::TimePoint;

namespace {

// "rank 0, 2: allreduce float32 [4] sum on cpu; rank 1: allreduce float32 [5] sum on cpu"
std::string mismatch_message(const NegotiationEngine::State& s, const PendingTensor& tensor,
                             int world) {
  std::vector<int> reference_ranks;
  std::vector<uint8_t> other(world, 0);
  for (const auto& variant : tensor.disagreements) {
    for (int r : variant.ranks) other[r] = 1;
  }
  for (int r = 0; r < world; ++r) {
    if (tensor.has_rank(r) && !other[r]) reference_ranks.push_back(r);
  }
  std::string message = std::string(engine::op_name(tensor.reference->op)) + " '" + tensor.name +
                        "': ranks submitted different metadata: ";
  auto add = [&](const std::vector<int>& ranks, const TensorMeta& meta) {
    message += (ranks.size() == 1 ? "rank " : "ranks ") + engine::format_ranks(s.rank_names(ranks)) +
               " sent " +
               engine::describe(meta) + "; ";
  };
  add(reference_ranks, *tensor.reference);
  for (const auto& variant : tensor.disagreements) {
    std::vector<int> ranks = variant.ranks;
    std::sort(ranks.begin(), ranks.end());
    add(ranks, variant.meta);
  }
  message += "every rank must submit this name with the same op, dtype, shape, root, reduce op "
             "and scale factors";
  return message;
}

int64_t response_bytes(const PendingTensor& tensor) {
  const TensorMeta& meta = *tensor.reference;
  const int64_t element = engine::dtype_size(meta.dtype);
  if (meta.op == v1::COLLECTIVE_OP_ALLGATHER) {
    int64_t rows = 0;
    for (int64_t dim : tensor.first_dims) rows += dim;
    return rows * engine::row_elements(meta.shape) * element;
  }
  return engine::element_count(meta.shape) * element;
}

void fill_header(v1::Response& response, const PendingTensor& tensor, int world,
                 bool average_over_all) {
  const TensorMeta& meta = *tensor.reference;
  response.set_op(meta.op);
  response.set_dtype(meta.dtype);
  response.set_device(meta.device);
  response.set_reduce_op(meta.reduce_op);
  response.set_prescale(meta.prescale);
  response.set_postscale(meta.postscale);
  response.set_root_rank(meta.root_rank);
  if (meta.op == v1::COLLECTIVE_OP_PROCESS_SET_ADD)
    for (int64_t member : meta.splits) response.add_process_set_members(static_cast<int32_t>(member));
  for (int r : tensor.joined_at_ready) response.add_joined_ranks(r);
  response.set_contributing_ranks(
      average_over_all ? world : world - static_cast<int>(tensor.joined_at_ready.size()));
}

// Rows each rank sends to each other rank: the rank's splits, or an even split of its rows.
void fill_splits_matrix(v1::ResponseTensor& out, const PendingTensor& tensor, int world) {
  for (int src = 0; src < world; ++src) {
    const std::vector<int64_t>& splits = tensor.splits[src];
    const int64_t rows = tensor.first_dims[src];
    for (int dst = 0; dst < world; ++dst) {
      if (!tensor.has_rank(src)) {
        out.add_splits_matrix(0);
      } else if (!splits.empty()) {
        out.add_splits_matrix(splits[dst]);
      } else {
        out.add_splits_matrix(rows / world + (dst < rows % world ? 1 : 0));
      }
    }
  }
}

}  // namespace

std::optional<v1::Plan> NegotiationEngine::State::build_plan(TimePoint now) {
  if (ready.empty() && immediate.empty() && !join_done) return std::nullopt;
  const int world = options.world_size;
  const int64_t threshold = options.fusion_threshold_bytes;

  // Which fusion keys may go now: waited long enough, nothing pending could join, or full.
  std::vector<uint8_t> key_due(fusion_keys.size(), 0);
  std::vector<int64_t> key_bytes(fusion_keys.size(), 0);
  std::vector<TimePoint> key_oldest(fusion_keys.size(), TimePoint::max());
  // Group id -> ready members, failed ones included: a member that failed is as finished as one
  // that can run, and the group must not wait for it forever.
  std::map<uint64_t, uint32_t> group_ready;
  for (const PendingTensor* tensor : ready) {
    if (tensor->grouped()) ++group_ready[tensor->reference->group_id];
    if (tensor->failed()) continue;
    if (tensor->fusion_key < 0) continue;
    key_bytes[tensor->fusion_key] += response_bytes(*tensor);
    key_oldest[tensor->fusion_key] = std::min(key_oldest[tensor->fusion_key], tensor->ready_time);
  }
  for (size_t k = 0; k < fusion_keys.size(); ++k) {
    key_due[k] = threshold == 0 || not_ready_by_key[k] == 0 || key_bytes[k] >= threshold ||
                 (key_oldest[k] != TimePoint::max() && now >= key_oldest[k] + options.cycle_time);
  }
  // A failed member goes with the rest of its group, as Horovod does it: the others run and it
  // fails alone. Were it to go first, the group would count one member fewer ever after.
  auto due = [&](const PendingTensor& tensor) {
    if (tensor.grouped()) return group_ready[tensor.reference->group_id] >= tensor.reference->group_size;
    if (tensor.failed()) return true;
    if (tensor.fusion_key < 0) return true;
    return key_due[tensor.fusion_key] != 0;
  };

  std::vector<PendingTensor*> going;
  std::vector<PendingTensor*> staying;
  for (PendingTensor* tensor : ready) (due(*tensor) ? going : staying).push_back(tensor);
  if (going.empty() && immediate.empty() && !join_done) return std::nullopt;
  std::sort(going.begin(), going.end(),
            [](const PendingTensor* a, const PendingTensor* b) { return a->arrival < b->arrival; });

  v1::Plan plan;
  plan.set_seq(next_seq++);
  for (v1::Response& response : immediate) *plan.add_responses() = std::move(response);
  immediate.clear();

  // The open (still filling) response per fusion key (proto/fusion_packing.h) and per group.
  FusionPacker packer(threshold);
  // A group's members complete together, but each response has one dtype, device, reduce op
  // and scaling: members that differ in those go in separate responses of the same plan.
  struct OpenGroup {
    uint64_t id;
    FusionKey key;
    int response;
  };
  std::vector<OpenGroup> open_groups;
  for (PendingTensor* tensor : going) {
    const TensorMeta& meta = *tensor->reference;
    if (tensor->failed()) {
      v1::Response& response = *plan.add_responses();
      response.set_op(meta.op);
      response.set_dtype(meta.dtype);
      response.add_tensors()->set_name(tensor->name);
      response.set_error(tensor->invalid.empty() ? mismatch_message(*this, *tensor, world) : tensor->invalid);
      continue;
    }
    const int64_t bytes = response_bytes(*tensor);
    v1::Response* response = nullptr;
    if (tensor->grouped()) {
      const FusionKey key{meta.op,        meta.dtype,    meta.device,
                                  meta.reduce_op, meta.prescale, meta.postscale};
      auto open = std::find_if(open_groups.begin(), open_groups.end(), [&](const OpenGroup& g) {
        return g.id == meta.group_id && g.key == key;
      });
      if (open != open_groups.end()) {
        response = plan.mutable_responses(open->response);
      } else {
        open_groups.push_back(OpenGroup{meta.group_id, key, plan.responses_size()});
        response = plan.add_responses();
        fill_header(*response, *tensor, world, options.join_average_all);
      }
    } else if (tensor->fusion_key >= 0 && threshold > 0) {
      const int k = tensor->fusion_key;
      if (const int open = packer.place(k, bytes); open >= 0) {
        response = plan.mutable_responses(open);
      } else {
        packer.opened(k, plan.responses_size(), bytes);
        response = plan.add_responses();
        fill_header(*response, *tensor, world, options.join_average_all);
      }
    } else {
      response = plan.add_responses();
      fill_header(*response, *tensor, world, options.join_average_all);
    }
    // Fused tensors share joined_ranks only if they agree; a response's joined ranks come from
    // its first tensor, so a tensor that disagrees starts a response of its own.
    if (response->tensors_size() > 0 &&
        !std::equal(tensor->joined_at_ready.begin(), tensor->joined_at_ready.end(),
                    response->joined_ranks().begin(), response->joined_ranks().end())) {
      if (tensor->fusion_key >= 0) packer.opened(tensor->fusion_key, plan.responses_size(), bytes);
      response = plan.add_responses();
      fill_header(*response, *tensor, world, options.join_average_all);
    }

    // The cache: keep the id (remembering what was negotiated) or assign the next one.
    uint32_t cache_id = tensor->cache_id;
    if (cache_id != 0) {
      engine::CacheEntry& entry = cache[cache_id - 1];
      if (!tensor->reference_from_cache) entry.meta = meta;
      if (meta.op == v1::COLLECTIVE_OP_ALLGATHER) entry.first_dims = tensor->first_dims;
    } else if (engine::is_cacheable(meta.op) &&
               cache.size() < static_cast<size_t>(std::max(options.cache_capacity, 0))) {
      cache_id = static_cast<uint32_t>(cache.size() + 1);
      engine::CacheEntry& entry = cache.emplace_back();
      entry.name = tensor->name;
      entry.meta = meta;
      if (meta.op == v1::COLLECTIVE_OP_ALLGATHER) entry.first_dims = tensor->first_dims;
      entry.slot = std::make_unique<PendingTensor>();
      entry.slot->name = tensor->name;
      entry.slot->cache_id = cache_id;
      cache_slots.push_back(entry.slot.get());
      cache_id_by_name.emplace(tensor->name, cache_id);
    }

    v1::ResponseTensor& out = *response->add_tensors();
    out.set_name(tensor->name);
    out.set_cache_id(cache_id);
    // Every rank knows this tensor by its id (it sent the id, and every rank received the plan
    // that assigned it): the wire form may leave out name and shape.
    out.set_as_cached(tensor->cache_id != 0 && tensor->reference_from_cache &&
                      (meta.op == v1::COLLECTIVE_OP_ALLREDUCE ||
                       meta.op == v1::COLLECTIVE_OP_BROADCAST ||
                       meta.op == v1::COLLECTIVE_OP_REDUCESCATTER));
    out.mutable_shape()->Assign(meta.shape.begin(), meta.shape.end());
    if (meta.op == v1::COLLECTIVE_OP_ALLGATHER || meta.op == v1::COLLECTIVE_OP_ALLTOALL) {
      if (!out.shape().empty()) out.set_shape(0, tensor->first_dims[0]);
    }
    if (meta.op == v1::COLLECTIVE_OP_ALLGATHER) {
      out.mutable_first_dims()->Assign(tensor->first_dims.begin(), tensor->first_dims.end());
    }
    if (meta.op == v1::COLLECTIVE_OP_ALLTOALL) fill_splits_matrix(out, *tensor, world);
  }

  if (join_done) {
    *plan.add_responses() = std::move(*join_done);
    join_done.reset();
  }
  for (PendingTensor* tensor : going) release(*tensor);
  ready = std::move(staying);
  return plan;
}

}  // namespace hvrun::coordinator
