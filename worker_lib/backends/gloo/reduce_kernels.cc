#include "worker_lib/backends/gloo/reduce_kernels.h"

#include <algorithm>
#include <cstdint>

namespace hvrun::detail::gloo_backend {
namespace {

template <typename T, typename Op>
ReduceFn make(Op op) {
  return [op](void* out, const void* a, const void* b, size_t n) {
    T* o = static_cast<T*>(out);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) o[i] = op(x[i], y[i]);
  };
}

template <typename T>
ReduceFn for_type(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return make<T>([](T x, T y) { return static_cast<T>(x + y); });
    case ReduceOp::kMin:
      return make<T>([](T x, T y) { return std::min(x, y); });
    case ReduceOp::kMax:
      return make<T>([](T x, T y) { return std::max(x, y); });
    case ReduceOp::kProduct:
      return make<T>([](T x, T y) { return static_cast<T>(x * y); });
  }
  return nullptr;
}

}  // namespace

ReduceFn reduce_function(DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kUInt8: return for_type<uint8_t>(op);
    case DataType::kInt8: return for_type<int8_t>(op);
    case DataType::kInt16: return for_type<int16_t>(op);
    case DataType::kInt32: return for_type<int32_t>(op);
    case DataType::kInt64: return for_type<int64_t>(op);
    case DataType::kFloat32: return for_type<float>(op);
    case DataType::kFloat64: return for_type<double>(op);
    case DataType::kFloat16:
    case DataType::kBFloat16: return nullptr;
  }
  return nullptr;
}

}  // namespace hvrun::detail::gloo_backend
