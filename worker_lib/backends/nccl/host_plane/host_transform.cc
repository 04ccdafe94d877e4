#include "worker_lib/backends/nccl/host_plane/host_transform.h"

#include <cstring>
#include <limits>

#include "worker_lib/half.h"

namespace hvrun::detail::cuda {
namespace {

template <typename T>
struct Math {  // integers, float, double: the kernel's Math<T> and FloatMath<T>
  using Work = T;
  static Work load(T v) { return v; }
  static T store(Work v) { return v; }
  static Work div(Work v, int64_t d) {
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<Work>(static_cast<double>(v) / static_cast<double>(d));
    else
      return static_cast<Work>(v / static_cast<Work>(d));
  }
  static Work scale(Work v, double s) { return static_cast<Work>(static_cast<double>(v) * s); }
  static T neutral(ReduceOp op) {
    constexpr bool fp = std::is_floating_point_v<T>;
    switch (op) {
      case ReduceOp::kProduct: return T(1);
      case ReduceOp::kMin: return fp ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
      case ReduceOp::kMax: return fp ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
      default: return T(0);
    }
  }
};

template <uint16_t (*Narrow)(float), float (*Widen)(uint16_t)>
struct HalfMath {  // float16, bfloat16: float work type, as on the GPU
  using Work = float;
  static Work load(uint16_t v) { return Widen(v); }
  static uint16_t store(Work v) { return Narrow(v); }
  static Work div(Work v, int64_t d) { return v / static_cast<float>(d); }
  static Work scale(Work v, double s) { return static_cast<float>(static_cast<double>(v) * s); }
  static uint16_t neutral(ReduceOp op) { return Narrow(Math<float>::neutral(op)); }
};
using Float16Math = HalfMath<float_to_float16, float16_to_float>;
using BFloat16Math = HalfMath<float_to_bfloat16, bfloat16_to_float>;

template <typename T, typename M>
void transform(const Segment& seg, const SegmentTransform& t) {
  T* dst = static_cast<T*>(seg.dst);
  if (seg.src == nullptr) {
    const T value = M::neutral(t.neutral_op);
    for (uint64_t i = 0; i < seg.count; ++i) dst[i] = value;
    return;
  }
  const T* src = static_cast<const T*>(seg.src);
  for (uint64_t i = 0; i < seg.count; ++i) {
    typename M::Work v = M::load(src[i]);
    if (t.divisor > 1) v = M::div(v, t.divisor);
    if (t.scale != 1.0) v = M::scale(v, t.scale);
    dst[i] = M::store(v);
  }
}

void transform_any(const Segment& s, const SegmentTransform& t) {
  switch (t.dtype) {
    case DataType::kUInt8: return transform<uint8_t, Math<uint8_t>>(s, t);
    case DataType::kInt8: return transform<int8_t, Math<int8_t>>(s, t);
    case DataType::kInt16: return transform<int16_t, Math<int16_t>>(s, t);
    case DataType::kInt32: return transform<int32_t, Math<int32_t>>(s, t);
    case DataType::kInt64: return transform<int64_t, Math<int64_t>>(s, t);
    case DataType::kFloat16: return transform<uint16_t, Float16Math>(s, t);
    case DataType::kBFloat16: return transform<uint16_t, BFloat16Math>(s, t);
    case DataType::kFloat32: return transform<float, Math<float>>(s, t);
    case DataType::kFloat64: return transform<double, Math<double>>(s, t);
  }
}

}  // namespace

void host_copy_segments(std::span<const Segment> segments, const SegmentTransform& t) {
  const bool zero_neutral = t.neutral_op == ReduceOp::kSum || t.neutral_op == ReduceOp::kAverage;
  const size_t esize = dtype_size(t.dtype);
  for (const Segment& s : segments) {
    if (s.count == 0) continue;
    if (t.scale == 1.0 && t.divisor <= 1 && zero_neutral) {  // the kernel's byte path
      if (s.src == nullptr) std::memset(s.dst, 0, s.count * esize);
      else if (s.src != s.dst) std::memmove(s.dst, s.src, s.count * esize);
      continue;
    }
    transform_any(s, t);
  }
}

void host_divide(void* data, size_t count, DataType dtype, int ranks) {
  Segment s{data, data, count};
  transform_any(s, {.dtype = dtype, .divisor = ranks});
}

}  // namespace hvrun::detail::cuda
