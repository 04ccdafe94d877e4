// One user name submitted as different collectives (negotiation_engine.h, step 11).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string_view>

#include "coordinator/engine/engine_state.h"
#include "proto/collective_op_name.h"

namespace hvrun::coordinator {

using engine::PendingTensor;
using TimePoint = NegotiationEngine::TimePoint;

namespace {

// "the name 'm' was used for different collectives: rank 0 submitted allreduce 'allreduce.m',
// rank 1 submitted allgather 'allgather.m'; ..."
std::string op_mismatch_message(const NegotiationEngine::State& s, std::string_view user_name,
                                const std::vector<PendingTensor*>& tensors,
                                std::chrono::microseconds grace) {
  std::string message = "the name '" + std::string(user_name) +
                        "' was used for different collectives: ";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PendingTensor& tensor = *tensors[i];
    std::vector<int> ranks;
    for (int r = 0; r < s.options.world_size; ++r)
      if (tensor.has_rank(r)) ranks.push_back(s.rank_name(r));
    message += (i ? ", " : "") + std::string(ranks.size() == 1 ? "rank " : "ranks ") +
               engine::format_ranks(ranks) + " submitted " +
               std::string(engine::op_name(tensor.reference->op)) + " '" + tensor.name + "'";
  }
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f",
                std::chrono::duration<double>(grace).count());
  message += " (none of them submitted anything else for " + std::string(waited) +
             " s, --op-mismatch-grace-seconds); every rank must call the same collective "
             "under one name (hvrun's Python bindings submit a name as '<op>.<name>', so "
             "different ops under one name are different tensors)";
  return message;
}

}  // namespace

std::vector<std::string> NegotiationEngine::fail_op_mismatches(TimePoint now) {
  State& s = *state_;
  const std::chrono::microseconds grace = s.options.op_mismatch_grace;
  if (grace.count() <= 0 || s.active.empty()) return {};
  const TimePoint settled = now - grace;
  // Tensors waiting since before the grace, by the user's name; ordered by name so that the
  // same inputs always fail the same names in the same order.
  std::map<std::string_view, std::vector<PendingTensor*>> by_user_name;
  for (PendingTensor* tensor : s.active) {
    if (tensor->ready || tensor->reference == nullptr || tensor->first_time > settled) continue;
    const std::string_view user_name = user_tensor_name(tensor->name, tensor->reference->op);
    if (is_generated_name(user_name)) continue;  // no name given: nothing used twice
    by_user_name[user_name].push_back(tensor);
  }
  std::vector<uint64_t> involved(s.bitset_words);
  std::vector<int> waiting_on;  // per rank: not-ready tensors it submitted (filled when needed)
  std::vector<std::string> messages;
  for (auto& [user_name, tensors] : by_user_name) {
    if (tensors.size() < 2) continue;
    const v1::CollectiveOp first_op = tensors.front()->reference->op;
    if (std::all_of(tensors.begin(), tensors.end(),
                    [&](const PendingTensor* t) { return t->reference->op == first_op; }))
      continue;
    // Disjoint: no rank has two of them in flight.
    std::fill(involved.begin(), involved.end(), 0);
    bool disjoint = true;
    for (const PendingTensor* tensor : tensors) {
      for (size_t w = 0; w < s.bitset_words && disjoint; ++w) {
        disjoint = (involved[w] & tensor->submitted[w]) == 0;
        involved[w] |= tensor->submitted[w];
      }
    }
    if (!disjoint) continue;
    // Idle, and waiting on this name alone.
    if (waiting_on.empty()) {
      waiting_on.assign(s.options.world_size, 0);
      for (const PendingTensor* tensor : s.active) {
        if (tensor->ready) continue;
        for (int r = 0; r < s.options.world_size; ++r)
          if (tensor->has_rank(r)) ++waiting_on[r];
      }
    }
    bool settled_ranks = true;
    for (int r = 0; r < s.options.world_size && settled_ranks; ++r) {
      if (!((involved[r >> 6] >> (r & 63)) & 1u)) continue;
      settled_ranks = waiting_on[r] == 1 && s.last_submission[r] <= settled;
    }
    if (!settled_ranks) continue;
    std::sort(tensors.begin(), tensors.end(),
              [](const PendingTensor* a, const PendingTensor* b) { return a->arrival < b->arrival; });
    std::string message = op_mismatch_message(s, user_name, tensors, grace);
    for (PendingTensor* tensor : tensors) {
      tensor->invalid = message;
      s.mark_ready(*tensor, now);
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

}  // namespace hvrun::coordinator
