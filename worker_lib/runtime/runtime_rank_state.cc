#include "worker_lib/runtime/runtime_rank_state.h"

#include <algorithm>
#include <mutex>

namespace hvrun::detail {

bool RuntimeRankState::idle() {
  std::lock_guard<std::mutex> lock(state_.mutex);
  const WorkState& s = state_;
  return !s.terminal && !s.abort_reason && !s.stream_ended && !s.stop_requested &&
         s.in_flight.empty() && s.outbox.empty() && s.inbox.empty() &&
         s.plans_received == s.plans_started &&
         // The timeline shows every collective's negotiation: recording takes the slow path.
         !telemetry_.recording();
}

bool RuntimeRankState::waiting_for_coordinator() {
  std::lock_guard<std::mutex> lock(state_.mutex);
  return state_.waiting_for_coordinator();
}

bool RuntimeRankState::outbox_may_hold() {
  std::lock_guard<std::mutex> lock(state_.mutex);
  return std::all_of(state_.outbox.begin(), state_.outbox.end(),
                     [](const auto& op) { return RequestCache::may_run_fast(*op); });
}

RankState::Taken RuntimeRankState::take_outbox(uint32_t max_id, std::vector<HeldOp>& held) {
  std::lock_guard<std::mutex> lock(state_.mutex);
  WorkState& s = state_;
  if (s.terminal) {  // terminate() failed every op in flight, the held ones too
    s.held_for_rounds = 0;
    return Taken::kTerminal;
  }
  if (s.outbox.empty() && held.empty()) return Taken::kNothing;
  const bool may_hold = !s.abort_reason && !s.stream_ended && !s.stop_requested &&
                        s.inbox.empty() && s.plans_received == s.plans_started &&
                        s.in_flight.size() == s.held_for_rounds + s.outbox.size() &&
                        // The timeline shows every collective's negotiation.
                        !telemetry_.recording();
  if (!may_hold) return Taken::kSend;
  const RequestCache& cache = submitter_.cache();  // the executor's lock is held
  outbox_ids_.clear();
  for (const auto& op : s.outbox) {
    const CacheEntry* entry = cache.round_entry(*op);
    if (entry == nullptr || entry->id > max_id) return Taken::kSend;
    outbox_ids_.push_back(entry->id);
  }
  for (size_t i = 0; i < s.outbox.size(); ++i)
    held.push_back(HeldOp{outbox_ids_[i], std::move(s.outbox[i])});
  s.held_for_rounds += s.outbox.size();
  s.outbox.clear();
  submitter_.batch_taken();
  return Taken::kHeld;
}

bool RuntimeRankState::start_agreed(const std::vector<HeldOp>& agreed) {
  std::lock_guard<std::mutex> lock(state_.mutex);
  if (state_.terminal) return false;  // already failed (take_outbox drops the rest)
  for (const HeldOp& h : agreed) state_.in_flight.remove(*h.op);
  state_.held_for_rounds -= agreed.size();
  return true;
}

void RuntimeRankState::send_held(std::vector<HeldOp>& held) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    if (!state_.terminal)
      for (auto it = held.rbegin(); it != held.rend(); ++it)
        state_.outbox.push_front(std::move(it->op));
    held.clear();
    state_.held_for_rounds = 0;
  }
  submitter_.flush_outbox();
}

}  // namespace hvrun::detail
