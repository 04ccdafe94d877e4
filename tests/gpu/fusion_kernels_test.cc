// The pack/unpack kernels against a CPU reference, on fresh random data of odd sizes and
// misaligned addresses, for every dtype and transform (plain copy, prescale, Average's division,
// neutral fill). Needs a GPU; skips with the reason otherwise.
#include "worker_lib/backends/nccl/plugin/fusion_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/gpu/gpu_test_support.h"
#include "worker_lib/backends/nccl/segment_table.h"
#include "worker_lib/half.h"

namespace hvrun::detail::cuda {
namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())

// The CPU reference of one element: the same formula the kernels use.
double to_double(DataType t, const std::byte* p) {
  switch (t) {
    case DataType::kUInt8: return *reinterpret_cast<const uint8_t*>(p);
    case DataType::kInt8: return *reinterpret_cast<const int8_t*>(p);
    case DataType::kInt16: return *reinterpret_cast<const int16_t*>(p);
    case DataType::kInt32: return *reinterpret_cast<const int32_t*>(p);
    case DataType::kInt64: return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DataType::kFloat16: return float16_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DataType::kBFloat16: return bfloat16_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DataType::kFloat32: return *reinterpret_cast<const float*>(p);
    case DataType::kFloat64: return *reinterpret_cast<const double*>(p);
  }
  return 0;
}

template <typename T>
void ref_int(const std::byte* in, std::byte* out, const SegmentTransform& t) {
  T v;
  std::memcpy(&v, in, sizeof v);
  if (t.divisor > 1) v = static_cast<T>(v / static_cast<T>(t.divisor));
  if (t.scale != 1.0) v = static_cast<T>(static_cast<double>(v) * t.scale);
  std::memcpy(out, &v, sizeof v);
}

void reference(DataType t, const std::byte* in, std::byte* out, const SegmentTransform& tr) {
  switch (t) {
    case DataType::kUInt8: return ref_int<uint8_t>(in, out, tr);
    case DataType::kInt8: return ref_int<int8_t>(in, out, tr);
    case DataType::kInt16: return ref_int<int16_t>(in, out, tr);
    case DataType::kInt32: return ref_int<int32_t>(in, out, tr);
    case DataType::kInt64: return ref_int<int64_t>(in, out, tr);
    case DataType::kFloat64: {
      double v = to_double(t, in);
      if (tr.divisor > 1) v = v / static_cast<double>(tr.divisor);
      if (tr.scale != 1.0) v = v * tr.scale;
      std::memcpy(out, &v, sizeof v);
      return;
    }
    default: {  // float32 and the half types compute in float
      float v = static_cast<float>(to_double(t, in));
      if (tr.divisor > 1) v = static_cast<float>(static_cast<double>(v) / static_cast<double>(tr.divisor));
      if (tr.scale != 1.0) v = static_cast<float>(static_cast<double>(v) * tr.scale);
      if (t == DataType::kFloat32) std::memcpy(out, &v, 4);
      else {
        uint16_t h = t == DataType::kFloat16 ? float_to_float16(v) : float_to_bfloat16(v);
        std::memcpy(out, &h, 2);
      }
    }
  }
}

void fill_random(DataType t, std::vector<std::byte>& bytes, std::mt19937_64& rng) {
  const size_t esize = dtype_size(t);
  std::uniform_real_distribution<float> value(-100, 100);
  for (size_t i = 0; i + esize <= bytes.size(); i += esize) {
    if (t == DataType::kFloat16 || t == DataType::kBFloat16) {
      float f = value(rng);
      uint16_t h = t == DataType::kFloat16 ? float_to_float16(f) : float_to_bfloat16(f);
      std::memcpy(&bytes[i], &h, 2);
    } else if (t == DataType::kFloat32) {
      float f = value(rng);
      std::memcpy(&bytes[i], &f, 4);
    } else if (t == DataType::kFloat64) {
      double d = value(rng);
      std::memcpy(&bytes[i], &d, 8);
    } else {
      uint64_t r = rng();
      std::memcpy(&bytes[i], &r, esize);
    }
  }
}

struct Case {
  DataType dtype;
  SegmentTransform transform;
  const char* name;
};

void PrintTo(const Case& c, std::ostream* out) { *out << dtype_name(c.dtype) << " " << c.name; }

class FusionKernels : public ::testing::TestWithParam<Case> {};

// Several segments of odd sizes (one spanning many chunks), copied from `src` into `dst` and
// compared with the reference, bit for bit. Their addresses take the kernels' three paths in
// turn: one element past a 16-byte boundary on one side only (scalar), both on a boundary (16-byte
// vectors), both one element past it (a scalar head, then vectors).
TEST_P(FusionKernels, MatchTheCpuReference) {
  HVRUN_SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  SegmentTransform tr = c.transform;
  tr.dtype = c.dtype;
  const size_t esize = dtype_size(c.dtype);
  std::mt19937_64 rng(std::random_device{}());
  std::vector<uint64_t> counts{1, 3, 17, 1001, 70001, 262147 + rng() % 1000};
  constexpr uint64_t kSpacing = 64;  // bytes: every segment's base is 64-byte aligned
  uint64_t total = 0;
  for (auto n : counts) total += n + 2 + kSpacing / esize;
  std::vector<std::byte> host_in(total * esize), host_out(total * esize);
  fill_random(c.dtype, host_in, rng);
  std::memset(host_out.data(), 0x5a, host_out.size());
  std::byte *dev_in = nullptr, *dev_out = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dev_in), host_in.size()));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dev_out), host_out.size()));
  CUDA_OK(cudaMemcpy(dev_in, host_in.data(), host_in.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev_out, host_out.data(), host_out.size(), cudaMemcpyHostToDevice));
  std::vector<Segment> segments;
  uint64_t at = 0;  // bytes, a multiple of kSpacing (cudaMalloc's memory is 256-byte aligned)
  for (size_t i = 0; i < counts.size(); ++i) {
    const int mode = static_cast<int>(i % 3);  // 0: one side off, 1: aligned, 2: both one element off
    const uint64_t src_at = at + (mode == 0 || mode == 2 ? esize : 0);
    const uint64_t dst_at = at + (mode == 2 ? esize : 0);
    segments.push_back({dev_in + src_at, dev_out + dst_at, counts[i]});
    at += ((counts[i] + 2) * esize + kSpacing - 1) / kSpacing * kSpacing;
  }
  if (tr.neutral_op != ReduceOp::kSum) segments[2].src = nullptr;  // a joined rank's share
  std::vector<Segment> chunks = split_segments(segments, kChunkBytes / esize, esize);
  Segment* table = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&table), chunks.size() * sizeof(Segment)));
  CUDA_OK(cudaMemcpy(table, chunks.data(), chunks.size() * sizeof(Segment), cudaMemcpyHostToDevice));
  CUDA_OK(launch_copy_segments(table, chunks.size(), tr, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<std::byte> got(host_out.size());
  CUDA_OK(cudaMemcpy(got.data(), dev_out, got.size(), cudaMemcpyDeviceToHost));

  std::vector<std::byte> want = host_out;  // untouched bytes stay 0x5a
  std::vector<std::byte> neutral(esize);
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = segments[i];
    const size_t src_at = static_cast<size_t>(static_cast<const std::byte*>(s.src ? s.src : dev_in) - dev_in);
    const size_t dst_at = static_cast<size_t>(static_cast<std::byte*>(s.dst) - dev_out);
    for (uint64_t j = 0; j < s.count; ++j) {
      std::byte* out = want.data() + dst_at + j * esize;
      if (s.src == nullptr) continue;  // checked below
      reference(c.dtype, host_in.data() + src_at + j * esize, out, tr);
    }
    if (s.src == nullptr) {
      // The neutral value of the op: the same for every element; compare with element 0.
      for (uint64_t j = 1; j < s.count; ++j) {
        ASSERT_EQ(std::memcmp(got.data() + dst_at, got.data() + dst_at + j * esize, esize), 0);
      }
      const double v = to_double(c.dtype, got.data() + dst_at);
      if (tr.neutral_op == ReduceOp::kProduct) {
        EXPECT_EQ(v, 1.0);
      } else if (tr.neutral_op == ReduceOp::kMin) {
        EXPECT_TRUE(v > 100 || std::isinf(v)) << v;
      } else if (tr.neutral_op == ReduceOp::kMax) {
        EXPECT_TRUE(v < -100 || std::isinf(v) || c.dtype == DataType::kUInt8) << v;
      }
      std::memcpy(want.data() + dst_at, got.data() + dst_at, s.count * esize);
    }
  }
  size_t mismatches = 0;
  for (size_t i = 0; i < want.size(); i += esize)
    if (std::memcmp(want.data() + i, got.data() + i, esize) != 0 && ++mismatches <= 5)
      ADD_FAILURE() << c.name << ": element at byte " << i << " got " << to_double(c.dtype, got.data() + i)
                    << " want " << to_double(c.dtype, want.data() + i);
  EXPECT_EQ(mismatches, 0u) << c.name;
  cudaFree(table);
  cudaFree(dev_in);
  cudaFree(dev_out);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const DataType types[] = {DataType::kUInt8, DataType::kInt8, DataType::kInt16, DataType::kInt32,
                            DataType::kInt64, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
  for (DataType t : types) {
    cases.push_back({t, {.scale = 1.0}, "copy"});
    cases.push_back({t, {.scale = 0.5}, "prescale"});
    cases.push_back({t, {.scale = 2.0, .divisor = 3}, "average_postscale"});
    // A scale float cannot hold: the kernels apply it in double.
    cases.push_back({t, {.scale = 1.0 / 3.0, .divisor = 7}, "average_inexact_scale"});
    cases.push_back({t, {.neutral_op = ReduceOp::kMin}, "neutral_min"});
    cases.push_back({t, {.scale = 0.25, .neutral_op = ReduceOp::kProduct}, "neutral_product"});
    cases.push_back({t, {.neutral_op = ReduceOp::kMax}, "neutral_max"});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, FusionKernels, ::testing::ValuesIn(all_cases()),
                         [](const auto& param_info) {
                           return std::string(dtype_name(param_info.param.dtype)) + "_" + param_info.param.name;
                         });

}  // namespace
}  // namespace hvrun::detail::cuda
