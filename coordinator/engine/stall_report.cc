// Stall reports: tensors some ranks submitted long ago, and who is still missing.
#include <algorithm>
#include <map>
#include <sstream>

#include "coordinator/engine/engine_state.h"

namespace hvrun::coordinator {

namespace {
// " on process set 2" (nothing for the global set).
std::string on_process_set(const StalledTensor& stall) {
  return stall.process_set_id == 0 ? "" : " on process set " + std::to_string(stall.process_set_id);
}
}  // namespace

std::vector<StalledTensor> NegotiationEngine::stalled_tensors(TimePoint now,
                                                              Clock::duration older_than) const {
  const State& s = *state_;
  std::vector<const engine::PendingTensor*> old;
  for (const engine::PendingTensor* tensor : s.active) {
    if (!tensor->ready && now - tensor->first_time >= older_than) old.push_back(tensor);
  }
  std::sort(old.begin(), old.end(), [](auto* a, auto* b) { return a->arrival < b->arrival; });
  std::vector<StalledTensor> stalls;
  for (const engine::PendingTensor* tensor : old) {
    StalledTensor stall;
    stall.name = tensor->name;
    stall.op = tensor->reference ? tensor->reference->op : v1::COLLECTIVE_OP_UNSPECIFIED;
    stall.waited = now - tensor->first_time;
    stall.process_set_id = s.options.process_set_id;
    for (int r = 0; r < s.options.world_size; ++r) {
      if (tensor->has_rank(r)) {
        stall.submitted_ranks.push_back(s.rank_name(r));
      } else if (!s.joined[r]) {
        stall.missing_ranks.push_back(s.rank_name(r));
      }
    }
    stalls.push_back(std::move(stall));
  }
  return stalls;
}

std::string describe_stall(const StalledTensor& stall) {
  std::ostringstream out;
  out << engine::op_name(stall.op) << " '" << stall.name << "'" << on_process_set(stall)
      << " has waited "
      << std::chrono::duration_cast<std::chrono::milliseconds>(stall.waited).count() / 1000.0
      << " s for " << (stall.missing_ranks.size() == 1 ? "rank " : "ranks ")
      << engine::format_ranks(stall.missing_ranks) << " (submitted by "
      << (stall.submitted_ranks.size() == 1 ? "rank " : "ranks ")
      << engine::format_ranks(stall.submitted_ranks)
      << "); are those ranks stuck, or running a different code path?";
  return out.str();
}

}  // namespace hvrun::coordinator

namespace hvrun::coordinator {

namespace {
constexpr size_t kRanksDescribed = 8;    // missing ranks described one by one
constexpr size_t kTensorsDescribed = 5;  // tensors named per described rank
}  // namespace

std::string describe_stalls(const std::vector<StalledTensor>& stalls,
                            const std::function<std::string(int rank)>& detail) {
  std::map<int, std::vector<const StalledTensor*>> by_rank;  // missing rank -> its stalls
  for (const StalledTensor& stall : stalls) {
    for (int rank : stall.missing_ranks) by_rank[rank].push_back(&stall);
  }
  std::vector<int> missing;
  for (const auto& [rank, unused] : by_rank) missing.push_back(rank);
  std::ostringstream out;
  out << (missing.size() == 1 ? "rank " : "ranks ") << engine::format_ranks(missing)
      << (missing.size() == 1 ? " has" : " have") << " not submitted what the other ranks wait for";
  // A message for people: a few ranks and a few tensors each, the rest counted (a job of
  // thousands of ranks or a model of hundreds of tensors would otherwise print pages).
  size_t ranks_described = 0;
  for (const auto& [rank, waiting] : by_rank) {
    if (ranks_described++ == kRanksDescribed) {
      out << "; " << by_rank.size() - kRanksDescribed << " more of those ranks likewise";
      break;
    }
    out << "; rank " << rank;
    if (detail) out << detail(rank);
    out << " has not submitted ";
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (i == kTensorsDescribed) {
        out << ", and " << waiting.size() - kTensorsDescribed << " more (" << waiting.size()
            << " in all)";
        break;
      }
      const StalledTensor& stall = *waiting[i];
      out << (i ? ", " : "") << engine::op_name(stall.op) << " '" << stall.name << "'"
          << on_process_set(stall) << " (waited "
          << std::chrono::duration_cast<std::chrono::milliseconds>(stall.waited).count() / 1000.0
          << " s; submitted by " << (stall.submitted_ranks.size() == 1 ? "rank " : "ranks ")
          << engine::format_ranks(stall.submitted_ranks) << ")";
    }
  }
  out << ". Are those ranks stuck (in computation, I/O, a deadlock), or running a different code "
         "path that skips these collectives?";
  return out.str();
}

}  // namespace hvrun::coordinator
