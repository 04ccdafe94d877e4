#include "worker_lib/backends/nccl/plugin/fusion_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/std/limits>

#include <cstdint>

namespace hvrun::detail::cuda {
namespace {

constexpr int kThreads = 256;

unsigned element_size(DataType t) {
  switch (t) {
    case DataType::kUInt8:
    case DataType::kInt8: return 1;
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kInt32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kFloat64: return 8;
  }
  return 1;
}

// ---- Plain copies: bytes, with the widest access both pointers allow.
template <typename V>
__device__ void copy_as(const unsigned char* src, unsigned char* dst, uint64_t bytes) {
  const uint64_t n = bytes / sizeof(V);
  const V* s = reinterpret_cast<const V*>(src);
  V* d = reinterpret_cast<V*>(dst);
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = s[i];
  for (uint64_t i = n * sizeof(V) + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
}

__global__ void copy_bytes_kernel(const Segment* table, unsigned element_bytes) {
  const Segment seg = table[blockIdx.x];
  const uint64_t bytes = seg.count * element_bytes;
  unsigned char* dst = static_cast<unsigned char*>(seg.dst);
  if (seg.src == nullptr) {  // a joined rank's share: the neutral value is all zero bits here
    for (uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = 0;
    return;
  }
  const unsigned char* src = static_cast<const unsigned char*>(seg.src);
  const uintptr_t both = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst);
  if (both % 16 == 0) copy_as<uint4>(src, dst, bytes);
  else if (both % 8 == 0) copy_as<uint2>(src, dst, bytes);
  else if (both % 4 == 0) copy_as<uint32_t>(src, dst, bytes);
  else copy_as<unsigned char>(src, dst, bytes);
}

// ---- Typed transforms: v = v / divisor; v = v * scale; or the neutral value.
template <typename T> struct Math {  // integers
  using Work = T;
  __device__ static Work load(T v) { return v; }
  __device__ static T store(Work v) { return v; }
  __device__ static Work div(Work v, int64_t d) { return static_cast<Work>(v / static_cast<Work>(d)); }
  __device__ static Work scale(Work v, double s) { return static_cast<Work>(static_cast<double>(v) * s); }
  __device__ static T neutral(ReduceOp op) {
    switch (op) {
      case ReduceOp::kProduct: return T(1);
      case ReduceOp::kMin: return ::cuda::std::numeric_limits<T>::max();
      case ReduceOp::kMax: return ::cuda::std::numeric_limits<T>::lowest();
      default: return T(0);
    }
  }
};

template <typename T> struct FloatMath {  // float, double
  using Work = T;
  __device__ static Work load(T v) { return v; }
  __device__ static T store(Work v) { return v; }
  __device__ static Work div(Work v, int64_t d) { return static_cast<Work>(static_cast<double>(v) / static_cast<double>(d)); }
  __device__ static Work scale(Work v, double s) { return static_cast<Work>(static_cast<double>(v) * s); }
  __device__ static T neutral(ReduceOp op) {
    switch (op) {
      case ReduceOp::kProduct: return T(1);
      case ReduceOp::kMin: return ::cuda::std::numeric_limits<T>::infinity();
      case ReduceOp::kMax: return -::cuda::std::numeric_limits<T>::infinity();
      default: return T(0);
    }
  }
};
template <> struct Math<float> : FloatMath<float> {};
template <> struct Math<double> : FloatMath<double> {};

template <> struct Math<__half> {
  using Work = float;
  __device__ static Work load(__half v) { return __half2float(v); }
  __device__ static __half store(Work v) { return __float2half_rn(v); }
  __device__ static Work div(Work v, int64_t d) { return v / static_cast<float>(d); }
  __device__ static Work scale(Work v, double s) { return static_cast<float>(static_cast<double>(v) * s); }
  __device__ static __half neutral(ReduceOp op) { return store(FloatMath<float>::neutral(op)); }
};

template <> struct Math<__nv_bfloat16> {
  using Work = float;
  __device__ static Work load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(Work v) { return __float2bfloat16_rn(v); }
  __device__ static Work div(Work v, int64_t d) { return v / static_cast<float>(d); }
  __device__ static Work scale(Work v, double s) { return static_cast<float>(static_cast<double>(v) * s); }
  __device__ static __nv_bfloat16 neutral(ReduceOp op) { return store(FloatMath<float>::neutral(op)); }
};

template <typename T>
__global__ void transform_kernel(const Segment* table, double scale, int64_t divisor, ReduceOp neutral_op) {
  using M = Math<T>;
  const Segment seg = table[blockIdx.x];
  T* dst = static_cast<T*>(seg.dst);
  if (seg.src == nullptr) {
    const T value = M::neutral(neutral_op);
    for (uint64_t i = threadIdx.x; i < seg.count; i += blockDim.x) dst[i] = value;
    return;
  }
  const T* src = static_cast<const T*>(seg.src);
  for (uint64_t i = threadIdx.x; i < seg.count; i += blockDim.x) {
    typename M::Work v = M::load(src[i]);
    if (divisor > 1) v = M::div(v, divisor);
    if (scale != 1.0) v = M::scale(v, scale);
    dst[i] = M::store(v);
  }
}

template <typename T>
cudaError_t launch_typed(const Segment* table, size_t chunks, const SegmentTransform& t, cudaStream_t s) {
  transform_kernel<T><<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(table, t.scale, t.divisor, t.neutral_op);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_copy_segments(const Segment* device_table, size_t chunks,
                                 const SegmentTransform& t, cudaStream_t stream) {
  if (chunks == 0) return cudaSuccess;
  // Plain copies of data (and zero fills) move bytes; joined ranks' neutral values need types
  // unless the neutral value is zero bits (Sum/Average).
  const bool zero_neutral = t.neutral_op == ReduceOp::kSum || t.neutral_op == ReduceOp::kAverage;
  if (is_plain_copy(t) && zero_neutral) {
    copy_bytes_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
        device_table, element_size(t.dtype));
    return cudaGetLastError();
  }
  switch (t.dtype) {
    case DataType::kUInt8: return launch_typed<uint8_t>(device_table, chunks, t, stream);
    case DataType::kInt8: return launch_typed<int8_t>(device_table, chunks, t, stream);
    case DataType::kInt16: return launch_typed<int16_t>(device_table, chunks, t, stream);
    case DataType::kInt32: return launch_typed<int32_t>(device_table, chunks, t, stream);
    case DataType::kInt64: return launch_typed<int64_t>(device_table, chunks, t, stream);
    case DataType::kFloat16: return launch_typed<__half>(device_table, chunks, t, stream);
    case DataType::kBFloat16: return launch_typed<__nv_bfloat16>(device_table, chunks, t, stream);
    case DataType::kFloat32: return launch_typed<float>(device_table, chunks, t, stream);
    case DataType::kFloat64: return launch_typed<double>(device_table, chunks, t, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace hvrun::detail::cuda
