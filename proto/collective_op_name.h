// The one spelling of each collective op that users see: errors, logs, metrics labels and
// timeline arguments (the coordinator and the worker library both use it).
#pragma once

#include <string_view>

#include "hvrun.pb.h"

namespace hvrun {

inline const char* collective_op_name(v1::CollectiveOp op) {
  switch (op) {
    case v1::COLLECTIVE_OP_ALLREDUCE: return "allreduce";
    case v1::COLLECTIVE_OP_ALLGATHER: return "allgather";
    case v1::COLLECTIVE_OP_BROADCAST: return "broadcast";
    case v1::COLLECTIVE_OP_ALLTOALL: return "alltoall";
    case v1::COLLECTIVE_OP_REDUCESCATTER: return "reducescatter";
    case v1::COLLECTIVE_OP_BARRIER: return "barrier";
    case v1::COLLECTIVE_OP_JOIN: return "join";
    case v1::COLLECTIVE_OP_PROCESS_SET_ADD: return "add_process_set";
    case v1::COLLECTIVE_OP_PROCESS_SET_REMOVE: return "remove_process_set";
    default: return "unspecified-op";
  }
}

// The name a user gave a tensor. The Python bindings, as Horovod's, submit a named collective
// as "<op>.<name>" ("allreduce.m", "allgather.m"; unnamed ones "<op>.noname.<n>"), so two ops
// called under one name arrive as two tensors; without that prefix this is `name` itself (the
// C and C++ APIs submit the name as given). Only the prefix of the tensor's own op is taken
// off: "allreduce.m" submitted as an allgather is the user's "allreduce.m".
inline std::string_view user_tensor_name(std::string_view name, v1::CollectiveOp op) {
  const std::string_view prefix = collective_op_name(op);
  if (name.size() > prefix.size() + 1 && name.starts_with(prefix) && name[prefix.size()] == '.')
    return name.substr(prefix.size() + 1);
  return name;
}

// Whether user_tensor_name() is one the bindings made for an unnamed call: "noname.<n>", or
// "ps<id>.noname.<n>" on a process set. They count each op on its own, so allreduce's
// "noname.3" and allgather's "noname.3" are unrelated calls, not one name used twice.
inline bool is_generated_name(std::string_view user_name) {
  if (user_name.starts_with("ps")) {
    size_t i = 2;
    while (i < user_name.size() && user_name[i] >= '0' && user_name[i] <= '9') ++i;
    if (i > 2 && i < user_name.size() && user_name[i] == '.') user_name.remove_prefix(i + 1);
  }
  return user_name.starts_with("noname.");
}

}  // namespace hvrun
