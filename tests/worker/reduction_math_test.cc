// Packing for allreduce: prescale on the way in, neutral values for joined ranks, Average's
// division (integer types truncate) and postscale on the way out, half types widened to float32.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "worker_lib/half.h"
#include "worker_lib/reduction/reduction_math.h"

namespace hvrun::detail {
namespace {

TEST(ReductionMath, WorkTypeWidensOnlyHalfTypes) {
  EXPECT_EQ(work_dtype(DataType::kFloat16), DataType::kFloat32);
  EXPECT_EQ(work_dtype(DataType::kBFloat16), DataType::kFloat32);
  EXPECT_EQ(work_dtype(DataType::kInt8), DataType::kInt8);
  EXPECT_EQ(work_dtype(DataType::kFloat64), DataType::kFloat64);
}

TEST(ReductionMath, NeutralValuesAreTheIdentityOfEachOp) {
  std::vector<int32_t> i(3);
  fill_neutral(i.data(), 3, DataType::kInt32, ReduceOp::kMin);
  EXPECT_EQ(i[2], std::numeric_limits<int32_t>::max());
  fill_neutral(i.data(), 3, DataType::kInt32, ReduceOp::kMax);
  EXPECT_EQ(i[2], std::numeric_limits<int32_t>::lowest());
  fill_neutral(i.data(), 3, DataType::kInt32, ReduceOp::kProduct);
  EXPECT_EQ(i[2], 1);
  fill_neutral(i.data(), 3, DataType::kInt32, ReduceOp::kAverage);
  EXPECT_EQ(i[2], 0);
  std::vector<float> f(2);  // float16's work type
  fill_neutral(f.data(), 2, DataType::kFloat16, ReduceOp::kMin);
  EXPECT_TRUE(std::isinf(f[1]) && f[1] > 0);
  fill_neutral(f.data(), 2, DataType::kBFloat16, ReduceOp::kMax);
  EXPECT_TRUE(std::isinf(f[1]) && f[1] < 0);
}

TEST(ReductionMath, IntegerAverageTruncatesTowardZero) {
  std::vector<int8_t> sum = {-5, 5, 7}, out(3);
  unpack_scaled(out.data(), sum.data(), 3, DataType::kInt8, ReduceOp::kAverage, 3, 1.0);
  EXPECT_EQ(out, (std::vector<int8_t>{-1, 1, 2}));
}

TEST(ReductionMath, HalfTypesRoundOnceAfterScaling) {
  std::vector<uint16_t> in = {float_to_float16(3.0f), float_to_float16(-1.5f)};
  std::vector<float> work(2);
  pack_scaled(work.data(), in.data(), 2, DataType::kFloat16, 0.5);
  EXPECT_EQ(work, (std::vector<float>{1.5f, -0.75f}));
  std::vector<uint16_t> out(2);
  unpack_scaled(out.data(), work.data(), 2, DataType::kFloat16, ReduceOp::kAverage, 3, 6.0);
  EXPECT_EQ(float16_to_float(out[0]), 3.0f);
  EXPECT_EQ(float16_to_float(out[1]), -1.5f);
  std::vector<uint16_t> bf(1);
  std::vector<float> w = {2.5f};
  unpack_scaled(bf.data(), w.data(), 1, DataType::kBFloat16, ReduceOp::kSum, 4, 2.0);
  EXPECT_EQ(bfloat16_to_float(bf[0]), 5.0f);
}

TEST(ReductionMath, UnpackInPlaceWithoutScalingLeavesDataAlone) {
  std::vector<double> v = {1.25, -2.5};
  unpack_scaled(v.data(), v.data(), 2, DataType::kFloat64, ReduceOp::kSum, 2, 1.0);
  EXPECT_EQ(v, (std::vector<double>{1.25, -2.5}));
  unpack_scaled(v.data(), v.data(), 2, DataType::kFloat64, ReduceOp::kAverage, 2, 1.0);
  EXPECT_EQ(v, (std::vector<double>{0.625, -1.25}));
}

}  // namespace
}  // namespace hvrun::detail
