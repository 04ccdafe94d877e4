// The aggregator's negotiation bookkeeping (NegotiationObserver): per rank and tensor, when its
// request arrived, and at the plan that ran it, negotiation and wait times, cache hits, the
// longest wait, fusion, joins and stalls, plus the timeline's "negotiated" slices and markers.
// Runs on the negotiation's thread(s) on the path of every plan: the steady state (cached ids)
// indexes by cache id and allocates nothing per step.
#include "coordinator/telemetry/aggregator.h"
#include "coordinator/telemetry/aggregator_util.h"

namespace hvrun::coordinator::telemetry {

using namespace detail;

void Aggregator::mark_locked(const std::string& name, int rank, TimePoint arrived) {
  mark_in(pending_[name], name, rank, arrived);
}

bool Aggregator::mark_id_locked(uint32_t id, int rank, TimePoint arrived) {
  if (id >= id_names_.size() || id_names_[id].empty()) return false;
  mark_in(pending_by_id_[id], id_names_[id], rank, arrived);
  return true;
}

void Aggregator::mark_in(Pending& p, const std::string& name, int rank, TimePoint arrived) {
  if (!p.active) {
    p.arrival.assign(ranks_.size(), TimePoint{});
    p.active = true;
  }
  if (p.arrival[rank] != TimePoint{}) {
    early_[name].push_back({rank, arrived});  // the next round, before this one's plan
    return;
  }
  p.arrival[rank] = arrived;
}

void Aggregator::on_requests(int rank, const v1::RequestBatch& batch, TimePoint arrived) {
  constexpr size_t kMaxUnresolved = 1 << 16;
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  RankState& state = ranks_[rank];
  auto mark = [&](const std::string& name) { mark_locked(name, rank, arrived); };
  auto mark_id = [&](uint32_t id) {
    if (!mark_id_locked(id, rank, arrived) && unresolved_.size() < kMaxUnresolved) {
      unresolved_.push_back({rank, id, arrived});  // its plan is being reported right now
    }
  };
  for (const v1::TensorRequest& request : batch.requests()) {
    if (request.cache_id() != 0 && request.name().empty()) {
      ++state.t.cache_hits;
      mark_id(request.cache_id());
      continue;
    }
    if (request.op() == v1::COLLECTIVE_OP_JOIN) {
      state.t.joined = true;
      if (timeline_) {
        ensure_process_locked(rank);
        timeline_->event(rank, "join", "join", wall_us(arrived), -1, {}, 'p');
      }
    }
    mark(request.name());
  }
  for (uint32_t id : batch.cached_ids()) {
    ++state.t.cache_hits;
    mark_id(id);
  }
}

void Aggregator::account_tensor_locked(const v1::Response& response, const v1::ResponseTensor& tensor,
                                       uint64_t seq, TimePoint sent) {
  const uint32_t id = tensor.cache_id();
  if (id != 0) {
    if (id >= id_names_.size()) {
      id_names_.resize(id + 1);
      pending_by_id_.resize(id + 1);
    }
    if (id_names_[id] != tensor.name()) id_names_[id] = tensor.name();
  }
  Pending* by_id = id != 0 && pending_by_id_[id].active ? &pending_by_id_[id] : nullptr;
  Pending* by_name = nullptr;
  auto it = pending_.empty() ? pending_.end() : pending_.find(tensor.name());
  if (it != pending_.end() && it->second.active) by_name = &it->second;
  if (!by_id && !by_name) return;
  // This round's arrivals: by id, and by name from ranks that re-sent full metadata.
  Pending& round = by_id ? *by_id : *by_name;
  if (by_id && by_name) {
    for (size_t r = 0; r < round.arrival.size(); ++r)
      if (round.arrival[r] == TimePoint{}) round.arrival[r] = by_name->arrival[r];
  }
  const std::vector<TimePoint>& arrival = round.arrival;
  TimePoint last{};
  for (const TimePoint& a : arrival) last = std::max(last, a);
  for (int r = 0; r < static_cast<int>(arrival.size()); ++r) {
    if (arrival[r] == TimePoint{}) continue;
    RankState& state = ranks_[r];
    RankTelemetry& t = state.t;
    const double wait = seconds(last - arrival[r]);
    t.negotiation_seconds += std::max(seconds(sent - arrival[r]), 0.0);
    t.wait_seconds += state.waiting.add(arrival[r], last);
    ++t.tensors_negotiated;
    if (wait > t.longest_wait_seconds) {
      t.longest_wait_seconds = wait;
      t.longest_wait_tensor = tensor.name();
    }
    if (!timeline_) continue;
    std::vector<int> waited_for;
    for (int other = 0; other < static_cast<int>(arrival.size()); ++other)
      if (other != r && (arrival[other] == TimePoint{} || arrival[other] > arrival[r]))
        waited_for.push_back(other);
    ensure_process_locked(r);
    TimelineArgs args{{"op", op_text(response.op())},
                      {"plan", std::to_string(seq)},
                      {"waited_for_ranks", rank_list(waited_for)}};
    if (response.tensors_size() > 1) args.emplace_back("fused_with", std::to_string(response.tensors_size() - 1));
    if (!response.error().empty()) args.emplace_back("error", response.error());
    timeline_->event(r, tensor.name(), "negotiated", wall_us(arrival[r]),
                     std::chrono::duration_cast<std::chrono::microseconds>(sent - arrival[r]).count(),
                     args);
  }
  // By id: the entry stays for the next step (nothing allocated per step). By name: erased
  // (barriers are named per call and would grow the table without bound).
  if (by_id) by_id->active = false;
  if (by_name) pending_.erase(it);
  if (auto early = early_.find(tensor.name()); early != early_.end()) {
    std::vector<Early> next = std::move(early->second);
    early_.erase(early);
    for (const Early& e : next) mark_locked(tensor.name(), e.rank, e.arrived);
  }
}

void Aggregator::on_plan(const v1::Plan& plan, TimePoint sent) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++plans_;
  uint64_t tensors = 0;
  for (const v1::Response& response : plan.responses()) {
    tensors += static_cast<uint64_t>(response.tensors_size());
    if (response.op() == v1::COLLECTIVE_OP_JOIN) {
      for (RankState& r : ranks_) r.t.joined = false;
      if (timeline_) {
        ensure_process_locked(options_.world_size);
        timeline_->event(options_.world_size, "job", "all joined", wall_us(sent), -1,
                         {{"last_joined_rank", std::to_string(response.last_joined_rank())}}, 'g');
      }
    }
    if (response.error().empty() && response.tensors_size() > 1) {
      ++fused_responses_;
      for (const auto& t : response.tensors()) fused_bytes_ += tensor_bytes(response, t);
    }
    if (response.error_ranks_size() > 0) continue;  // a duplicate: the first stays in flight
    if (response.process_set_id() != 0) continue;   // requests are counted for the global set
    for (const v1::ResponseTensor& t : response.tensors()) account_tensor_locked(response, t, plan.seq(), sent);
  }
  if (!unresolved_.empty()) {
    std::vector<Unresolved> still;
    for (const Unresolved& u : unresolved_) {
      if (!mark_id_locked(u.cache_id, u.rank, u.arrived)) still.push_back(u);
    }
    unresolved_.swap(still);
  }
  if (timeline_) {
    ensure_process_locked(options_.world_size);
    timeline_->event(options_.world_size, "plans", "plan", wall_us(sent), -1,
                     {{"seq", std::to_string(plan.seq())},
                      {"responses", std::to_string(plan.responses_size())},
                      {"tensors", std::to_string(tensors)}});
    timeline_->flush();
  }
}

void Aggregator::on_stalls(const std::vector<StalledTensor>& stalls) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t now = wall_us(std::chrono::steady_clock::now());
  for (const StalledTensor& stall : stalls) {
    for (int r : stall.missing_ranks) {
      if (r < 0 || r >= static_cast<int>(ranks_.size())) continue;
      ++ranks_[r].t.stalls;
      if (!timeline_) continue;
      ensure_process_locked(r);
      timeline_->event(r, stall.name, "stall", now, -1,
                       {{"waited_s", std::to_string(seconds(stall.waited))},
                        {"submitted_by", rank_list(stall.submitted_ranks)}},
                       'p');
    }
  }
  if (timeline_) timeline_->flush(true);
}

}  // namespace hvrun::coordinator::telemetry
