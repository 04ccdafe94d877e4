// What the PlanExecutor tests hand the executor, as the runtime would: a queued op over the
// caller's buffers, and a tensor of a hand-written coordinator Response.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hvrun.pb.h"
#include "worker_lib/execution/pending_op.h"

namespace hvrun::detail::plan_entries {

inline std::shared_ptr<PendingOp> op(const std::string& name, std::vector<int64_t> shape,
                                     DataType t, const void* in, void* out) {
  auto p = std::make_shared<PendingOp>();
  p->shape = std::move(shape);
  p->dtype = t;
  p->input = in;
  p->output = out;
  p->handle = std::make_shared<HandleState>(name);
  return p;
}

inline void add_tensor(v1::Response& r, const std::string& name, std::vector<int64_t> shape) {
  auto* t = r.add_tensors();
  t->set_name(name);
  for (auto d : shape) t->add_shape(d);
}

}  // namespace hvrun::detail::plan_entries
