#include "worker_lib/reduction/reduction_math.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "worker_lib/half.h"

namespace hvrun::detail {
namespace {

// Scaling happens in the type's own arithmetic for floating types (float32 in float: the
// element loops vectorise and never widen to double); integer types scale through double.
template <typename T>
void pack_native(T* dst, const T* src, size_t n, double prescale) {
  if (prescale == 1.0) {
    if (dst != src) std::memcpy(dst, src, n * sizeof(T));
    return;
  }
  if constexpr (std::numeric_limits<T>::is_integer) {
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(static_cast<double>(src[i]) * prescale);
  } else {
    const T scale = static_cast<T>(prescale);
    for (size_t i = 0; i < n; ++i) dst[i] = src[i] * scale;
  }
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

// dst <- src / divisor (when > 1; integer types truncate) * postscale. One loop per case, so
// each vectorises (dst may equal src).
template <typename T>
void finish_native(T* dst, const T* src, size_t n, int divisor, double postscale) {
  const bool divide = divisor > 1;
  if (!divide && postscale == 1.0) {
    if (dst != src) std::memmove(dst, src, n * sizeof(T));
    return;
  }
  if constexpr (std::numeric_limits<T>::is_integer) {
    for (size_t i = 0; i < n; ++i) {
      T v = src[i];
      if (divide) {
        if constexpr (sizeof(T) < 4) v = static_cast<T>(static_cast<int>(v) / divisor);
        else v = static_cast<T>(v / static_cast<T>(divisor));
      }
      if (postscale != 1.0) v = static_cast<T>(static_cast<double>(v) * postscale);
      dst[i] = v;
    }
  } else {
    const T d = static_cast<T>(divisor);
    const T p = static_cast<T>(postscale);
    // A power-of-two divisor: its exact reciprocal multiplies to the division's bits, cheaper.
    const bool exact_reciprocal = divide && (divisor & (divisor - 1)) == 0;
    const T r = static_cast<T>(1) / d;
    if (exact_reciprocal && postscale != 1.0) {
      for (size_t i = 0; i < n; ++i) dst[i] = src[i] * r * p;
    } else if (exact_reciprocal) {
      for (size_t i = 0; i < n; ++i) dst[i] = src[i] * r;
    } else if (divide && postscale != 1.0) {
      for (size_t i = 0; i < n; ++i) dst[i] = src[i] / d * p;
    } else if (divide) {
      for (size_t i = 0; i < n; ++i) dst[i] = src[i] / d;
    } else {
      for (size_t i = 0; i < n; ++i) dst[i] = src[i] * p;
    }
  }
}

template <typename Fn>
void dispatch_native(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kUInt8: fn(uint8_t{}); break;
    case DataType::kInt8: fn(int8_t{}); break;
    case DataType::kInt16: fn(int16_t{}); break;
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
  finish_scaled(dst, src, count, dtype, op == ReduceOp::kAverage ? contributors : 1, postscale);
}

void finish_scaled(void* dst, const void* src, size_t count, DataType dtype, int divisor,
                   double postscale) {
  if (is_half(dtype)) {
    const float* in = static_cast<const float*>(src);
    uint16_t* out = static_cast<uint16_t*>(dst);
    const bool bf16 = dtype == DataType::kBFloat16;
    const bool divide = divisor > 1;
    const bool exact_reciprocal = divide && (divisor & (divisor - 1)) == 0;
    const float d = static_cast<float>(divisor);
    const float r = 1.0f / d;
    const float p = static_cast<float>(postscale);
    for (size_t i = 0; i < count; ++i) {
      float v = in[i];
      if (exact_reciprocal) v = v * r;
      else if (divide) v = v / d;
      if (postscale != 1.0) v = v * p;
      out[i] = bf16 ? float_to_bfloat16(v) : float_to_float16(v);
    }
    return;
  }
  dispatch_native(dtype, [&](auto tag) {
    using T = decltype(tag);
    finish_native(static_cast<T*>(dst), static_cast<const T*>(src), count, divisor, postscale);
  });
}

}  // namespace hvrun::detail
