#include "worker_lib/execution/pending_op.h"

namespace hvrun::detail {

v1::TensorRequest PendingOp::to_request() const {
  v1::TensorRequest r;
  r.set_cache_id(0);
  r.set_name(name());
  r.set_op(op);
  r.set_dtype(static_cast<v1::DataType>(static_cast<int>(dtype)));
  for (int64_t d : shape) r.add_shape(d);
  r.set_device(device.is_cuda() ? v1::DEVICE_KIND_CUDA : v1::DEVICE_KIND_CPU);
  r.set_root_rank(root_rank);
  if (op == v1::COLLECTIVE_OP_ALLREDUCE || op == v1::COLLECTIVE_OP_REDUCESCATTER) {
    r.set_reduce_op(static_cast<v1::ReduceOp>(static_cast<int>(reduce_op)));
    r.set_prescale(prescale);
    r.set_postscale(postscale);
  }
  for (int64_t s : splits) r.add_splits(s);
  r.set_group_id(group_id);
  r.set_group_size(group_size);
  return r;
}

std::string PendingOp::cache_signature() const {
  v1::TensorRequest r = to_request();
  r.clear_name();
  r.clear_group_id();
  r.clear_group_size();
  std::string bytes;
  r.SerializeToString(&bytes);
  // Each set has cache ids of its own: a name used on two sets is two entries.
  bytes.append(reinterpret_cast<const char*>(&process_set), sizeof process_set);
  return bytes;
}

}  // namespace hvrun::detail
