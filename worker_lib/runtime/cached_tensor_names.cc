#include "worker_lib/runtime/cached_tensor_names.h"

namespace hvrun::detail {

Status CachedTensorNames::restore(v1::Plan& plan) {
  for (v1::Response& response : *plan.mutable_responses()) {
    const uint32_t set = response.process_set_id();
    for (v1::ResponseTensor& tensor : *response.mutable_tensors()) {
      if (tensor.cache_id() == 0) continue;
      const std::pair<uint32_t, uint32_t> key{set, tensor.cache_id()};
      if (!tensor.as_cached() || !tensor.name().empty()) {
        Known& known = known_[key];
        known.name = tensor.name();
        known.shape.assign(tensor.shape().begin(), tensor.shape().end());
        continue;
      }
      auto it = known_.find(key);
      if (it == known_.end())
        return internal_error("coordinator's plan " + std::to_string(plan.seq()) +
                              " names a tensor by cache id " + std::to_string(tensor.cache_id()) +
                              " of process set " + std::to_string(set) +
                              ", which no earlier plan assigned (protocol error)");
      tensor.set_name(it->second.name);
      tensor.mutable_shape()->Assign(it->second.shape.begin(), it->second.shape.end());
    }
  }
  return Status::ok();
}

}  // namespace hvrun::detail
