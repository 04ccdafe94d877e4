// The one spelling of each collective op that users see: errors, logs, metrics labels and
// timeline arguments (the coordinator and the worker library both use it).
#pragma once

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

}  // namespace hvrun
