// The metadata of one tensor request, in a canonical form the engine compares and describes.
// Pure data and functions; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hvrun.pb.h"

namespace hvrun::coordinator::engine {

struct TensorMeta {
  v1::CollectiveOp op = v1::COLLECTIVE_OP_UNSPECIFIED;
  v1::DataType dtype = v1::DATA_TYPE_UNSPECIFIED;
  v1::DeviceKind device = v1::DEVICE_KIND_UNSPECIFIED;
  std::vector<int64_t> shape;
  int32_t root_rank = 0;
  v1::ReduceOp reduce_op = v1::REDUCE_OP_UNSPECIFIED;
  double prescale = 1.0;   // the wire's 0 ("unset") is normalised to 1
  double postscale = 1.0;
  std::vector<int64_t> splits;
  uint64_t group_id = 0;
  uint32_t group_size = 0;

  friend bool operator==(const TensorMeta&, const TensorMeta&) = default;
};

// Canonical metadata of a full request (cache_id 0). Fields an op does not use are cleared, so
// that e.g. a stray root_rank on an allreduce never causes a mismatch.
TensorMeta meta_from_request(const v1::TensorRequest& request);

// Whether two ranks' submissions of one name agree on everything that must be equal across
// ranks: allgather and alltoall may differ in the first dimension (and alltoall in splits).
bool agree_across_ranks(const TensorMeta& a, const TensorMeta& b);

// "allreduce float32 [64, 3, 7, 7] sum on cpu" — how error messages show what a rank sent.
std::string describe(const TensorMeta& meta);

std::string_view op_name(v1::CollectiveOp op);
std::string_view dtype_name(v1::DataType dtype);
int64_t dtype_size(v1::DataType dtype);
int64_t element_count(const std::vector<int64_t>& shape);
// Elements per first-dimension row (product of the trailing dims; 1 for a vector or scalar).
int64_t row_elements(const std::vector<int64_t>& shape);

// Only these ops get a response-cache id (their per-rank variation, if any, is one number).
bool is_cacheable(v1::CollectiveOp op);

// "0-3, 5, 7-9": a compact list of ranks for messages about many ranks.
std::string format_ranks(const std::vector<int>& sorted_ranks);

}  // namespace hvrun::coordinator::engine
