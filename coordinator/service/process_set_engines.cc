#include "coordinator/service/process_set_engines.h"

#include <algorithm>

#include "coordinator/engine/tensor_meta.h"

namespace hvrun::coordinator::service {

namespace {
std::string describe_members(const std::vector<int>& members) {
  return "ranks [" + engine::format_ranks(members) + "]";
}
}  // namespace

ProcessSetEngines::ProcessSetEngines(EngineOptions global) : global_(std::move(global)) {
  std::vector<int> everyone(static_cast<size_t>(global_.world_size));
  for (int r = 0; r < global_.world_size; ++r) everyone[static_cast<size_t>(r)] = r;
  sets_.emplace(0, make_set(0, std::move(everyone)));
}

ProcessSetEngines::Set ProcessSetEngines::make_set(uint32_t id, std::vector<int> members) const {
  Set set;
  set.position.assign(static_cast<size_t>(global_.world_size), -1);
  for (size_t i = 0; i < members.size(); ++i) set.position[static_cast<size_t>(members[i])] = static_cast<int>(i);
  EngineOptions options = global_;
  options.world_size = static_cast<int>(members.size());
  if (members.size() != static_cast<size_t>(global_.world_size)) options.rank_names = members;
  set.members = std::move(members);
  options.process_set_id = id;
  set.engine = std::make_unique<NegotiationEngine>(std::move(options));
  return set;
}

Status ProcessSetEngines::submit(int rank, const v1::RequestBatch& batch, TimePoint now) {
  auto it = sets_.find(batch.process_set_id());
  if (it == sets_.end()) {
    return invalid_argument("rank " + std::to_string(rank) + " sent requests for process set " +
                            std::to_string(batch.process_set_id()) +
                            ", which does not exist (never added, or removed)");
  }
  Set& set = it->second;
  if (rank < 0 || rank >= global_.world_size || set.position[static_cast<size_t>(rank)] < 0) {
    return invalid_argument("rank " + std::to_string(rank) + " sent requests for process set " +
                            std::to_string(it->first) + " (" + describe_members(set.members) +
                            "), which it is not a member of");
  }
  return set.engine->submit(set.position[static_cast<size_t>(rank)], batch, now);
}

void ProcessSetEngines::rank_departed(int rank, TimePoint now) {
  if (rank < 0 || rank >= global_.world_size) return;
  for (auto& [id, set] : sets_) {
    const int position = set.position[static_cast<size_t>(rank)];
    if (position >= 0) set.engine->rank_departed(position, now);
  }
}

std::vector<DepartureFailure> ProcessSetEngines::take_departure_failures() {
  std::vector<DepartureFailure> all;
  for (auto& [id, set] : sets_) {
    for (DepartureFailure& failure : set.engine->take_departure_failures()) {
      if (id != 0)
        failure.message = "process set " + std::to_string(id) + " (" +
                          describe_members(set.members) + "): " + failure.message;
      all.push_back(std::move(failure));
    }
  }
  return all;
}

std::vector<std::string> ProcessSetEngines::fail_op_mismatches(TimePoint now) {
  std::vector<std::string> all;
  for (auto& [id, set] : sets_) {
    for (std::string& message : set.engine->fail_op_mismatches(now))
      all.push_back(id == 0 ? std::move(message)
                            : "process set " + std::to_string(id) + " (" +
                                  describe_members(set.members) + "): " + message);
  }
  return all;
}

std::optional<v1::Plan> ProcessSetEngines::take_plan(TimePoint now) {
  for (auto& [id, set] : sets_) {
    std::optional<v1::Plan> plan = set.engine->take_plan(now);
    if (!plan) continue;
    plan->set_seq(next_seq_++);
    const uint32_t set_id = id;  // apply_membership may change sets_
    for (v1::Response& response : *plan->mutable_responses()) {
      response.set_process_set_id(set_id);
      if (set_id != 0 && !response.error().empty())
        response.set_error("process set " + std::to_string(set_id) + " (" +
                           describe_members(set.members) + "): " + response.error());
      if (set_id == 0 && response.error().empty() &&
          (response.op() == v1::COLLECTIVE_OP_PROCESS_SET_ADD ||
           response.op() == v1::COLLECTIVE_OP_PROCESS_SET_REMOVE)) {
        apply_membership(response);
      }
    }
    return plan;
  }
  return std::nullopt;
}

std::string ProcessSetEngines::check_members(const std::vector<int>& members) const {
  if (members.empty()) return "a process set needs at least one rank";
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= global_.world_size)
      return "rank " + std::to_string(members[i]) + " is not in the job (ranks 0-" +
             std::to_string(global_.world_size - 1) + ")";
    if (i > 0 && members[i] <= members[i - 1])
      return "the ranks must be distinct and in ascending order";
  }
  for (const auto& [id, set] : sets_) {
    if (set.members == members)
      return "process set " + std::to_string(id) + " already has exactly these ranks";
  }
  return {};
}

void ProcessSetEngines::apply_membership(v1::Response& response) {
  // The engine passes each op's arguments through its single tensor's metadata; ranks agreed.
  if (response.op() == v1::COLLECTIVE_OP_PROCESS_SET_ADD) {
    const std::vector<int> members(response.process_set_members().begin(),
                                   response.process_set_members().end());
    const std::string problem = check_members(members);
    if (!problem.empty()) {
      response.set_error("add_process_set(" + describe_members(members) + "): " + problem);
      return;
    }
    const uint32_t id = next_id_;
    sets_.emplace(id, make_set(id, members));
    ++next_id_;
    response.set_created_process_set_id(id);
    return;
  }
  const uint32_t id = static_cast<uint32_t>(response.root_rank());
  auto it = sets_.find(id);
  std::string problem;
  if (id == 0) {
    problem = "the global process set cannot be removed";
  } else if (it == sets_.end()) {
    problem = "there is no process set " + std::to_string(id) + " (never added, or removed)";
  } else if (it->second.engine->in_flight_count() > 0) {
    problem = std::to_string(it->second.engine->in_flight_count()) +
              " of its collectives are still in flight on some of its ranks; every rank must "
              "wait for them before removing the set";
  }
  if (!problem.empty()) {
    response.set_error("remove_process_set(" + std::to_string(id) + "): " + problem);
    return;
  }
  sets_.erase(it);
}

std::optional<ProcessSetEngines::TimePoint> ProcessSetEngines::next_deadline() const {
  std::optional<TimePoint> earliest;
  for (const auto& [id, set] : sets_) {
    auto due = set.engine->next_deadline();
    if (due && (!earliest || *due < *earliest)) earliest = due;
  }
  return earliest;
}

std::vector<StalledTensor> ProcessSetEngines::stalled_tensors(
    TimePoint now, NegotiationEngine::Clock::duration older_than) const {
  std::vector<StalledTensor> all;
  for (const auto& [id, set] : sets_) {
    std::vector<StalledTensor> stalls = set.engine->stalled_tensors(now, older_than);
    std::move(stalls.begin(), stalls.end(), std::back_inserter(all));
  }
  return all;
}

}  // namespace hvrun::coordinator::service
