// One simulated rank's requests for a training step of `tensors` (allreduces of float32 CPU
// gradients, in backward order, as a trainer submits them): a cache id for each tensor the
// coordinator has given one, the full request for the others. Shared by the coordinator's
// benchmarks that talk to the real service.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/param_file.h"
#include "hvrun.pb.h"

namespace hvrun::bench {

inline v1::WorkerMessage step_requests(const std::vector<ParamShape>& tensors,
                                       const std::map<std::string, uint32_t>& cache_ids) {
  v1::WorkerMessage out;
  v1::RequestBatch* batch = out.mutable_requests();
  for (auto it = tensors.rbegin(); it != tensors.rend(); ++it) {
    if (auto id = cache_ids.find(it->name); id != cache_ids.end() && id->second != 0) {
      batch->add_cached_ids(id->second);
      continue;
    }
    v1::TensorRequest* r = batch->add_requests();
    r->set_name(it->name);
    r->set_op(v1::COLLECTIVE_OP_ALLREDUCE);
    r->set_dtype(v1::DATA_TYPE_FLOAT32);
    r->set_device(v1::DEVICE_KIND_CPU);
    r->set_reduce_op(v1::REDUCE_OP_SUM);
    for (int64_t d : it->shape) r->add_shape(d);
  }
  return out;
}

}  // namespace hvrun::bench
