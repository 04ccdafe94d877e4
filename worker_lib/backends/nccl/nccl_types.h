// hvrun's dtypes and reduce ops as NCCL's. Header-only over nccl.h: used by the plugin and by a
// CPU-run unit test (tests/worker/nccl_types_test.cc), which needs no GPU.
#pragma once

#include <nccl.h>

#include "hvrun/types.h"

namespace hvrun::detail::cuda {

inline ncclDataType_t to_nccl(DataType t) {
  switch (t) {
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt8: return ncclInt8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    // NCCL has no 16-bit integer type: Worker refuses int16 reductions of CUDA tensors at
    // submission, so this is never reached; an invalid type makes NCCL fail, never misread.
    case DataType::kInt16: return ncclNumTypes;
  }
  return ncclUint8;
}

// `average` asks for ncclAvg (NCCL >= 2.10): the sum divided by the number of ranks.
inline ncclRedOp_t to_nccl(ReduceOp op, bool average) {
  if (average) return ncclAvg;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return ncclSum;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
  }
  return ncclSum;
}

}  // namespace hvrun::detail::cuda
