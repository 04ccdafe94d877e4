#include "coordinator/engine/tensor_meta.h"
#include "proto/collective_op_name.h"

#include <sstream>

namespace hvrun::coordinator::engine {

TensorMeta meta_from_request(const v1::TensorRequest& request) {
  TensorMeta meta;
  meta.op = request.op();
  meta.dtype = request.dtype();
  meta.device = request.device();
  meta.shape.assign(request.shape().begin(), request.shape().end());
  meta.group_id = request.group_id();
  meta.group_size = request.group_size();
  switch (meta.op) {
    // A reducescatter is an allreduce of which each rank keeps its rows: the same reduce op
    // and scale factors travel to the plan (and take part in fusion and agreement).
    case v1::COLLECTIVE_OP_ALLREDUCE:
    case v1::COLLECTIVE_OP_REDUCESCATTER:
      meta.reduce_op = request.reduce_op() == v1::REDUCE_OP_UNSPECIFIED ? v1::REDUCE_OP_SUM
                                                                        : request.reduce_op();
      meta.prescale = request.prescale() == 0.0 ? 1.0 : request.prescale();
      meta.postscale = request.postscale() == 0.0 ? 1.0 : request.postscale();
      break;
    case v1::COLLECTIVE_OP_BROADCAST:
      meta.root_rank = request.root_rank();
      break;
    case v1::COLLECTIVE_OP_ALLTOALL:
      meta.splits.assign(request.splits().begin(), request.splits().end());
      break;
    case v1::COLLECTIVE_OP_BARRIER:
    case v1::COLLECTIVE_OP_JOIN:
      meta.shape.clear();
      meta.dtype = v1::DATA_TYPE_UNSPECIFIED;
      break;
    // Every rank must name the same members (splits) or the same set (root_rank).
    case v1::COLLECTIVE_OP_PROCESS_SET_ADD:
      meta.splits.assign(request.splits().begin(), request.splits().end());
      meta.shape.clear();
      meta.dtype = v1::DATA_TYPE_UNSPECIFIED;
      break;
    case v1::COLLECTIVE_OP_PROCESS_SET_REMOVE:
      meta.root_rank = request.root_rank();
      meta.shape.clear();
      meta.dtype = v1::DATA_TYPE_UNSPECIFIED;
      break;
    default:
      break;
  }
  if (meta.op != v1::COLLECTIVE_OP_ALLREDUCE) {
    meta.group_id = 0;
    meta.group_size = 0;
  }
  return meta;
}

bool agree_across_ranks(const TensorMeta& a, const TensorMeta& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.device != b.device || a.root_rank != b.root_rank ||
      a.reduce_op != b.reduce_op || a.prescale != b.prescale || a.postscale != b.postscale ||
      a.group_id != b.group_id || a.group_size != b.group_size) {
    return false;
  }
  if (a.op == v1::COLLECTIVE_OP_ALLGATHER || a.op == v1::COLLECTIVE_OP_ALLTOALL) {
    if (a.shape.size() != b.shape.size() || a.shape.empty()) return a.shape == b.shape;
    return std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1);
  }
  if (a.op == v1::COLLECTIVE_OP_PROCESS_SET_ADD && a.splits != b.splits) return false;
  return a.shape == b.shape;
}

std::string_view op_name(v1::CollectiveOp op) { return collective_op_name(op); }

std::string_view dtype_name(v1::DataType dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_UINT8: return "uint8";
    case v1::DATA_TYPE_INT8: return "int8";
    case v1::DATA_TYPE_INT16: return "int16";
    case v1::DATA_TYPE_INT32: return "int32";
    case v1::DATA_TYPE_INT64: return "int64";
    case v1::DATA_TYPE_FLOAT16: return "float16";
    case v1::DATA_TYPE_BFLOAT16: return "bfloat16";
    case v1::DATA_TYPE_FLOAT32: return "float32";
    case v1::DATA_TYPE_FLOAT64: return "float64";
    default: return "unspecified-dtype";
  }
}

namespace {
std::string_view reduce_name(v1::ReduceOp op) {
  switch (op) {
    case v1::REDUCE_OP_SUM: return "sum";
    case v1::REDUCE_OP_AVERAGE: return "average";
    case v1::REDUCE_OP_MIN: return "min";
    case v1::REDUCE_OP_MAX: return "max";
    case v1::REDUCE_OP_PRODUCT: return "product";
    default: return "unspecified-reduce-op";
  }
}

std::string_view device_name(v1::DeviceKind device) {
  switch (device) {
    case v1::DEVICE_KIND_CPU: return "cpu";
    case v1::DEVICE_KIND_CUDA: return "cuda";
    default: return "unspecified-device";
  }
}

void write_list(std::ostringstream& out, const std::vector<int64_t>& values) {
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << ']';
}
}  // namespace

std::string describe(const TensorMeta& meta) {
  std::ostringstream out;
  out << op_name(meta.op);
  if (meta.op == v1::COLLECTIVE_OP_BARRIER || meta.op == v1::COLLECTIVE_OP_JOIN) return out.str();
  if (meta.op == v1::COLLECTIVE_OP_PROCESS_SET_ADD) {
    out << " ranks ";
    write_list(out, meta.splits);
    return out.str();
  }
  if (meta.op == v1::COLLECTIVE_OP_PROCESS_SET_REMOVE) {
    out << " id " << meta.root_rank;
    return out.str();
  }
  out << ' ' << dtype_name(meta.dtype) << ' ';
  write_list(out, meta.shape);
  if (meta.op == v1::COLLECTIVE_OP_ALLREDUCE || meta.op == v1::COLLECTIVE_OP_REDUCESCATTER) {
    out << ' ' << reduce_name(meta.reduce_op);
  }
  if (meta.prescale != 1.0) out << " prescale " << meta.prescale;
  if (meta.postscale != 1.0) out << " postscale " << meta.postscale;
  if (meta.op == v1::COLLECTIVE_OP_BROADCAST) out << " root " << meta.root_rank;
  if (meta.op == v1::COLLECTIVE_OP_ALLTOALL && !meta.splits.empty()) {
    out << " splits ";
    write_list(out, meta.splits);
  }
  if (meta.group_id != 0) out << " group " << meta.group_id << " of " << meta.group_size;
  out << " on " << device_name(meta.device);
  return out.str();
}

int64_t dtype_size(v1::DataType dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_UINT8:
    case v1::DATA_TYPE_INT8: return 1;
    case v1::DATA_TYPE_INT16:
    case v1::DATA_TYPE_FLOAT16:
    case v1::DATA_TYPE_BFLOAT16: return 2;
    case v1::DATA_TYPE_INT32:
    case v1::DATA_TYPE_FLOAT32: return 4;
    case v1::DATA_TYPE_INT64:
    case v1::DATA_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

int64_t row_elements(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (size_t i = 1; i < shape.size(); ++i) count *= shape[i];
  return count;
}

bool is_cacheable(v1::CollectiveOp op) {
  return op == v1::COLLECTIVE_OP_ALLREDUCE || op == v1::COLLECTIVE_OP_BROADCAST ||
         op == v1::COLLECTIVE_OP_REDUCESCATTER || op == v1::COLLECTIVE_OP_ALLGATHER;
}

std::string format_ranks(const std::vector<int>& sorted_ranks) {
  std::string out;
  for (size_t i = 0; i < sorted_ranks.size();) {
    size_t j = i;
    while (j + 1 < sorted_ranks.size() && sorted_ranks[j + 1] == sorted_ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(sorted_ranks[i]);
    if (j > i) out += "-" + std::to_string(sorted_ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace hvrun::coordinator::engine
