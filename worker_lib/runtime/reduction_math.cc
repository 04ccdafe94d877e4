#include "worker_lib/runtime/reduction_math.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "worker_lib/half.h"

namespace hvrun::detail {
namespace {

template <typename T>
void pack_native(T* dst, const T* src, size_t n, double prescale) {
  if (prescale == 1.0) {
    std::memcpy(dst, src, n * sizeof(T));
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(static_cast<double>(src[i]) * prescale);
}

template <typename T>
void neutral(T* dst, size_t n, ReduceOp op) {
  T value{};
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: value = T(0); break;
    case ReduceOp::kProduct: value = T(1); break;
    case ReduceOp::kMin:
      value = std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                   : std::numeric_limits<T>::max();
      break;
    case ReduceOp::kMax:
      value = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                   : std::numeric_limits<T>::lowest();
      break;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = value;
}

template <typename T>
void unpack_native(T* dst, const T* src, size_t n, ReduceOp op, int contributors,
                   double postscale) {
  bool average = op == ReduceOp::kAverage && contributors > 1;
  if (!average && postscale == 1.0) {
    if (dst != src) std::memmove(dst, src, n * sizeof(T));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    T v = src[i];
    if (average) {
      if constexpr (std::numeric_limits<T>::is_integer) {
        v = static_cast<T>(v / static_cast<T>(contributors));
      } else {
        v = static_cast<T>(static_cast<double>(v) / contributors);
      }
    }
    if (postscale != 1.0) v = static_cast<T>(static_cast<double>(v) * postscale);
    dst[i] = v;
  }
}

template <typename Fn>
void dispatch_native(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kUInt8: fn(uint8_t{}); break;
    case DataType::kInt8: fn(int8_t{}); break;
    case DataType::kInt32: fn(int32_t{}); break;
    case DataType::kInt64: fn(int64_t{}); break;
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16: fn(float{}); break;
    case DataType::kFloat64: fn(double{}); break;
  }
}

bool is_half(DataType dtype) { return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16; }

}  // namespace

DataType work_dtype(DataType dtype) { return is_half(dtype) ? DataType::kFloat32 : dtype; }

void pack_scaled(void* dst, const void* src, size_t count, DataType dtype, double prescale) {
  if (is_half(dtype)) {
    float* out = static_cast<float*>(dst);
    const uint16_t* in = static_cast<const uint16_t*>(src);
    bool bf16 = dtype == DataType::kBFloat16;
    float scale = static_cast<float>(prescale);
    for (size_t i = 0; i < count; ++i) {
      float v = bf16 ? bfloat16_to_float(in[i]) : float16_to_float(in[i]);
      out[i] = prescale == 1.0 ? v : v * scale;
    }
    return;
  }
  dispatch_native(dtype, [&](auto tag) {
    using T = decltype(tag);
    pack_native(static_cast<T*>(dst), static_cast<const T*>(src), count, prescale);
  });
}

void fill_neutral(void* dst, size_t count, DataType dtype, ReduceOp op) {
  dispatch_native(dtype, [&](auto tag) {
    using T = decltype(tag);
    neutral(static_cast<T*>(dst), count, op);
  });
}

void unpack_scaled(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op,
                   int contributors, double postscale) {
  if (is_half(dtype)) {
    const float* in = static_cast<const float*>(src);
    uint16_t* out = static_cast<uint16_t*>(dst);
    bool bf16 = dtype == DataType::kBFloat16;
    bool average = op == ReduceOp::kAverage && contributors > 1;
    for (size_t i = 0; i < count; ++i) {
      float v = in[i];
      if (average) v /= static_cast<float>(contributors);
      if (postscale != 1.0) v = static_cast<float>(static_cast<double>(v) * postscale);
      out[i] = bf16 ? float_to_bfloat16(v) : float_to_float16(v);
    }
    return;
  }
  dispatch_native(dtype, [&](auto tag) {
    using T = decltype(tag);
    unpack_native(static_cast<T*>(dst), static_cast<const T*>(src), count, op, contributors,
                  postscale);
  });
}

}  // namespace hvrun::detail
