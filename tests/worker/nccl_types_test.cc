// hvrun dtypes and reduce ops as NCCL's (header only; runs without a GPU).
#include "worker_lib/backends/nccl/nccl_types.h"

#include <gtest/gtest.h>

namespace hvrun::detail::cuda {
namespace {

TEST(NcclTypes, EveryDtypeMapsToTheNcclTypeOfTheSameWidth) {
  EXPECT_EQ(to_nccl(DataType::kUInt8), ncclUint8);
  EXPECT_EQ(to_nccl(DataType::kInt8), ncclInt8);
  EXPECT_EQ(to_nccl(DataType::kInt32), ncclInt32);
  EXPECT_EQ(to_nccl(DataType::kInt64), ncclInt64);
  EXPECT_EQ(to_nccl(DataType::kFloat16), ncclFloat16);
  EXPECT_EQ(to_nccl(DataType::kBFloat16), ncclBfloat16);
  EXPECT_EQ(to_nccl(DataType::kFloat32), ncclFloat32);
  EXPECT_EQ(to_nccl(DataType::kFloat64), ncclFloat64);
}

TEST(NcclTypes, ReduceOpsAndAverage) {
  EXPECT_EQ(to_nccl(ReduceOp::kSum, false), ncclSum);
  EXPECT_EQ(to_nccl(ReduceOp::kMin, false), ncclMin);
  EXPECT_EQ(to_nccl(ReduceOp::kMax, false), ncclMax);
  EXPECT_EQ(to_nccl(ReduceOp::kProduct, false), ncclProd);
  // Average is ncclAvg when every rank contributes, else a Sum divided while unpacking.
  EXPECT_EQ(to_nccl(ReduceOp::kAverage, true), ncclAvg);
  EXPECT_EQ(to_nccl(ReduceOp::kAverage, false), ncclSum);
}

TEST(NcclTypes, ThisNcclHasWhatTheDataPlaneUses) {
  // ncclAvg and bf16 2.10.3; ncclGetLastError 2.13.4; non-blocking init 2.14.3.
  EXPECT_GE(NCCL_VERSION_CODE, NCCL_VERSION(2, 14, 3));
}

}  // namespace
}  // namespace hvrun::detail::cuda
