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

// Every access the kernels can make 16 bytes wide is: a segment is cut into a scalar head (until
// dst is 16-byte aligned), a body of 16-byte vectors and a scalar tail. The body needs src and
// dst equally misaligned (the fusion buffer's tensors start 16-byte aligned, and so do the
// allocators' tensors); otherwise every element is scalar.
struct Split {
  uint64_t head = 0;     // scalar elements first
  uint64_t vectors = 0;  // then 16-byte vectors
};

template <unsigned kElementBytes>
__device__ Split split(const void* src, void* dst, uint64_t count) {
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst);
  const uintptr_t s = src ? reinterpret_cast<uintptr_t>(src) : d;
  Split out;
  if ((s ^ d) % 16 != 0 || d % kElementBytes != 0) {
    out.head = count;
    return out;
  }
  const uint64_t head = ((16 - d % 16) % 16) / kElementBytes;
  out.head = head < count ? head : count;
  out.vectors = (count - out.head) / (16 / kElementBytes);
  return out;
}

// ---- Plain copies: bytes, 16 at a time where the pointers allow.
__global__ void copy_bytes_kernel(const Segment* table, unsigned element_bytes) {
  const Segment seg = table[blockIdx.x];
  const uint64_t bytes = seg.count * element_bytes;
  unsigned char* dst = static_cast<unsigned char*>(seg.dst);
  const unsigned char* src = static_cast<const unsigned char*>(seg.src);
  const Split sp = split<1>(src, dst, bytes);
  const uint64_t tail = sp.head + sp.vectors * 16;
  if (src == nullptr) {  // a joined rank's share: the neutral value is all zero bits here
    for (uint64_t i = threadIdx.x; i < sp.head; i += blockDim.x) dst[i] = 0;
    uint4* d = reinterpret_cast<uint4*>(dst + sp.head);
#pragma unroll 4
    for (uint64_t i = threadIdx.x; i < sp.vectors; i += blockDim.x) d[i] = make_uint4(0, 0, 0, 0);
    for (uint64_t i = tail + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = 0;
    return;
  }
  for (uint64_t i = threadIdx.x; i < sp.head; i += blockDim.x) dst[i] = src[i];
  const uint4* s = reinterpret_cast<const uint4*>(src + sp.head);
  uint4* d = reinterpret_cast<uint4*>(dst + sp.head);
#pragma unroll 4
  for (uint64_t i = threadIdx.x; i < sp.vectors; i += blockDim.x) d[i] = s[i];
  for (uint64_t i = tail + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
}

// ---- Typed transforms: v = v / divisor; v = v * scale; or the neutral value.
//
// Arithmetic: the results are those of dividing and scaling in double (the CPU reference), bit
// for bit, computed in float where that is provably the same:
//  * float32, float16, bfloat16 divide in float: the divisor (a rank count, < 2^24) is exact in
//    float and a correctly rounded float quotient equals the double quotient rounded to float.
//  * they scale in float when the scale is exact in float (0.5, 0.25, 2, ...): the product of
//    two floats is exact in double, so one float multiply rounds it the same way. Any other
//    scale (1/3, 1/7) is applied in double, as it would otherwise round twice.
//  * float64 stays double; integers divide as integers (int64 division is a slow emulated
//    sequence on the GPU, exact and left so) and scale in double (an int32's value is not exact
//    in float).
struct Factors {
  double scale = 1.0;
  float scale_f = 1.0f;
  bool scale_in_float = true;
  int64_t divisor = 1;
};

template <typename T> struct Math {  // integers
  using Work = T;
  __device__ static Work load(T v) { return v; }
  __device__ static T store(Work v) { return v; }
  __device__ static Work div(Work v, int64_t d) { return static_cast<Work>(v / static_cast<Work>(d)); }
  __device__ static Work scale(Work v, const Factors& f) { return static_cast<Work>(static_cast<double>(v) * f.scale); }
  __device__ static T neutral(ReduceOp op) {
    switch (op) {
      case ReduceOp::kProduct: return T(1);
      case ReduceOp::kMin: return ::cuda::std::numeric_limits<T>::max();
      case ReduceOp::kMax: return ::cuda::std::numeric_limits<T>::lowest();
      default: return T(0);
    }
  }
};

template <typename T> struct FloatNeutral {
  __device__ static T neutral(ReduceOp op) {
    switch (op) {
      case ReduceOp::kProduct: return T(1);
      case ReduceOp::kMin: return ::cuda::std::numeric_limits<T>::infinity();
      case ReduceOp::kMax: return -::cuda::std::numeric_limits<T>::infinity();
      default: return T(0);
    }
  }
};

// float arithmetic for float32, float16 and bfloat16 (see above for why it is exact).
struct FloatWork {
  __device__ static float div(float v, int64_t d) { return v / static_cast<float>(d); }
  __device__ static float scale(float v, const Factors& f) {
    return f.scale_in_float ? v * f.scale_f : static_cast<float>(static_cast<double>(v) * f.scale);
  }
};

template <> struct Math<double> : FloatNeutral<double> {
  using Work = double;
  __device__ static Work load(double v) { return v; }
  __device__ static double store(Work v) { return v; }
  __device__ static Work div(Work v, int64_t d) { return v / static_cast<double>(d); }
  __device__ static Work scale(Work v, const Factors& f) { return v * f.scale; }
};

template <> struct Math<float> : FloatNeutral<float>, FloatWork {
  using Work = float;
  __device__ static Work load(float v) { return v; }
  __device__ static float store(Work v) { return v; }
};

template <> struct Math<__half> : FloatWork {
  using Work = float;
  __device__ static Work load(__half v) { return __half2float(v); }
  __device__ static __half store(Work v) { return __float2half_rn(v); }
  __device__ static __half neutral(ReduceOp op) { return store(FloatNeutral<float>::neutral(op)); }
};

template <> struct Math<__nv_bfloat16> : FloatWork {
  using Work = float;
  __device__ static Work load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(Work v) { return __float2bfloat16_rn(v); }
  __device__ static __nv_bfloat16 neutral(ReduceOp op) { return store(FloatNeutral<float>::neutral(op)); }
};

template <typename T>
__device__ T apply(T in, const Factors& f) {
  using M = Math<T>;
  typename M::Work v = M::load(in);
  if (f.divisor > 1) v = M::div(v, f.divisor);
  if (f.scale != 1.0) v = M::scale(v, f);
  return M::store(v);
}

// 16 bytes as elements of T.
template <typename T> struct alignas(16) Lanes {
  static constexpr unsigned kCount = 16 / sizeof(T);
  T v[kCount];
};

template <typename T>
__global__ void transform_kernel(const Segment* table, Factors f, ReduceOp neutral_op) {
  static_assert(sizeof(Lanes<T>) == 16);
  const Segment seg = table[blockIdx.x];
  T* dst = static_cast<T*>(seg.dst);
  const T* src = static_cast<const T*>(seg.src);
  const Split sp = split<sizeof(T)>(src, dst, seg.count);
  const uint64_t tail = sp.head + sp.vectors * Lanes<T>::kCount;
  Lanes<T>* dv = reinterpret_cast<Lanes<T>*>(dst + sp.head);
  if (src == nullptr) {
    const T value = Math<T>::neutral(neutral_op);
    Lanes<T> fill;
#pragma unroll
    for (unsigned j = 0; j < Lanes<T>::kCount; ++j) fill.v[j] = value;
    for (uint64_t i = threadIdx.x; i < sp.head; i += blockDim.x) dst[i] = value;
#pragma unroll 4
    for (uint64_t i = threadIdx.x; i < sp.vectors; i += blockDim.x) dv[i] = fill;
    for (uint64_t i = tail + threadIdx.x; i < seg.count; i += blockDim.x) dst[i] = value;
    return;
  }
  for (uint64_t i = threadIdx.x; i < sp.head; i += blockDim.x) dst[i] = apply(src[i], f);
  const Lanes<T>* sv = reinterpret_cast<const Lanes<T>*>(src + sp.head);
#pragma unroll 4
  for (uint64_t i = threadIdx.x; i < sp.vectors; i += blockDim.x) {
    Lanes<T> x = sv[i];
#pragma unroll
    for (unsigned j = 0; j < Lanes<T>::kCount; ++j) x.v[j] = apply(x.v[j], f);
    dv[i] = x;
  }
  for (uint64_t i = tail + threadIdx.x; i < seg.count; i += blockDim.x) dst[i] = apply(src[i], f);
}

template <typename T>
cudaError_t launch_typed(const Segment* table, size_t chunks, const SegmentTransform& t, cudaStream_t s) {
  Factors f;
  f.scale = t.scale;
  f.scale_f = static_cast<float>(t.scale);
  f.scale_in_float = static_cast<double>(f.scale_f) == t.scale;
  f.divisor = t.divisor;
  transform_kernel<T><<<static_cast<unsigned>(chunks), kThreads, 0, s>>>(table, f, t.neutral_op);
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
