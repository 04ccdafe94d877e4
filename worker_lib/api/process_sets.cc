// hvrun::Worker's process sets: add and remove are collectives of the global set that every
// rank calls in the same order (the coordinator's process_set_engines.h applies them, the
// runtime's process_set_planes.h connects the members' data planes).
#include <algorithm>

#include "hvrun/hvrun.h"
#include "worker_lib/handle_state.h"
#include "worker_lib/runtime/runtime.h"

namespace hvrun {
namespace {

std::shared_ptr<detail::PendingOp> membership_op(detail::Runtime& runtime, v1::CollectiveOp op,
                                                 const char* what) {
  // Every rank makes these calls in the same order, so the count names the same call on each.
  auto p = detail::PendingOp::named(std::string(what) + "." +
                                    std::to_string(runtime.next_process_set_call()));
  p->op = op;
  p->shape = {0};
  return p;
}

}  // namespace

Result<ProcessSet> Worker::add_process_set(std::span<const int> ranks) {
  std::vector<int> members(ranks.begin(), ranks.end());
  std::sort(members.begin(), members.end());
  // Checked by the coordinator too (all ranks alike); refused here first so a mistake is
  // named at its call on every rank.
  if (members.empty())
    return invalid_argument("add_process_set: no ranks given; a process set needs at least one");
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= size())
      return invalid_argument("add_process_set: rank " + std::to_string(members[i]) +
                              " is not in the job (ranks 0-" + std::to_string(size() - 1) + ")");
    if (i > 0 && members[i] == members[i - 1])
      return invalid_argument("add_process_set: rank " + std::to_string(members[i]) +
                              " is given twice");
  }
  auto op = membership_op(*runtime_, v1::COLLECTIVE_OP_PROCESS_SET_ADD, "process_set.add");
  op->splits.assign(members.begin(), members.end());
  Handle handle = runtime_->submit(std::move(op));
  HVRUN_RETURN_IF_ERROR(wait(handle));
  return ProcessSet{handle.join_result()};
}

Status Worker::remove_process_set(ProcessSet process_set) {
  if (process_set.id == 0)
    return invalid_argument("remove_process_set: the global process set cannot be removed");
  auto op = membership_op(*runtime_, v1::COLLECTIVE_OP_PROCESS_SET_REMOVE, "process_set.remove");
  op->root_rank = process_set.id;
  // From here this rank's own collectives on the set are refused: one submitted after the
  // removal was sent would reach the coordinator after the set is gone.
  const auto id = static_cast<uint32_t>(std::max(process_set.id, 0));
  runtime_->set_process_set_removing(id, true);
  Status status = wait(runtime_->submit(std::move(op)));
  if (!status.is_ok()) runtime_->set_process_set_removing(id, false);
  return status;
}

Result<std::vector<int>> Worker::process_set_ranks(ProcessSet process_set) const {
  auto members = process_set.id < 0 ? std::nullopt
                                    : runtime_->process_set(static_cast<uint32_t>(process_set.id));
  if (!members)
    return not_found("there is no process set " + std::to_string(process_set.id) +
                     " (never added, or removed)");
  return members->ranks;
}

std::vector<ProcessSet> Worker::process_sets() const {
  std::vector<ProcessSet> sets;
  for (uint32_t id : runtime_->process_set_ids()) sets.push_back(ProcessSet{static_cast<int32_t>(id)});
  return sets;
}

}  // namespace hvrun
