// Shapes as the coordinator's responses carry them, read the same way by every executor
// (plan_executor for CPU tensors, backends/nccl/gpu_executor for CUDA ones).
#pragma once

#include <cstdint>
#include <vector>

#include "hvrun.pb.h"

namespace hvrun::detail {

inline std::vector<int64_t> shape_of(const v1::ResponseTensor& t) {
  return std::vector<int64_t>(t.shape().begin(), t.shape().end());
}

// Elements of a response's tensor, read in place (shape_of copies the shape).
inline int64_t elements_of(const v1::ResponseTensor& t) {
  int64_t n = 1;
  for (const int64_t d : t.shape()) n *= d;
  return n;
}

// Elements per row of the first dimension (1 for a vector or a scalar).
inline int64_t trailing_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

}  // namespace hvrun::detail
