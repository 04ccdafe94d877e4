// Test data for the worker tests: writes and reads any hvrun dtype as double, so references can
// be computed once in double precision and compared with a per-dtype tolerance.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hvrun/types.h"
#include "worker_lib/half.h"

namespace hvrun::test {

inline void store_value(void* base, size_t i, DataType t, double v) {
  switch (t) {
    case DataType::kUInt8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DataType::kInt16: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = detail::float_to_float16(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = detail::float_to_bfloat16(static_cast<float>(v));
      break;
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(base)[i] = v; break;
  }
}

inline double load_value(const void* base, size_t i, DataType t) {
  switch (t) {
    case DataType::kUInt8: return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(base)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(base)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kFloat16: return detail::float16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16: return detail::bfloat16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DataType::kFloat32: return static_cast<const float*>(base)[i];
    case DataType::kFloat64: return static_cast<const double*>(base)[i];
  }
  return 0;
}

inline bool is_integer(DataType t) {
  return t == DataType::kUInt8 || t == DataType::kInt8 || t == DataType::kInt16 ||
         t == DataType::kInt32 || t == DataType::kInt64;
}

inline bool close_enough(double got, double want, DataType t) {
  if (is_integer(t)) return got == want;
  double tol = t == DataType::kFloat16 || t == DataType::kBFloat16 ? 1e-2
               : t == DataType::kFloat32                           ? 1e-5
                                                                   : 1e-12;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

inline constexpr DataType kAllDtypes[] = {DataType::kUInt8,   DataType::kInt8,
                                          DataType::kInt16,   DataType::kInt32,
                                          DataType::kInt64,   DataType::kFloat16,
                                          DataType::kBFloat16, DataType::kFloat32,
                                          DataType::kFloat64};

// An input of `rank` at element `i` that every dtype holds exactly, and whose sums and products
// over a few ranks it holds exactly too; float32/float64 get a random fraction (from `rng`), so
// that comparing results bitwise across ranks means something.
inline double input_value(DataType t, ReduceOp op, int rank, size_t i, std::mt19937& rng) {
  if (op == ReduceOp::kProduct) return 1.0 + static_cast<double>((rank + i) % 2);
  double v = static_cast<double>((rank * 5 + i * 3) % 7);
  if (t == DataType::kUInt8) return v;
  if (t == DataType::kFloat32 || t == DataType::kFloat64)
    return v - 3 + std::uniform_real_distribution<double>(0, 1)(rng);
  return v - 3;
}

}  // namespace hvrun::test
