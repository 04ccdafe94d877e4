// Element types, reduction operators and tensor views of hvrun's public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace hvrun {

// Values match proto DataType and the C API's hvrun_dtype_t.
enum class DataType : int {
  kUInt8 = 1,
  kInt8 = 2,
  kInt32 = 3,
  kInt64 = 4,
  kFloat16 = 5,   // IEEE 754 binary16, stored as uint16_t bits
  kBFloat16 = 6,  // bfloat16, stored as uint16_t bits
  kFloat32 = 7,
  kFloat64 = 8,
};

// Values match proto ReduceOp and the C API's hvrun_reduce_op_t.
enum class ReduceOp : int {
  kSum = 1,
  kAverage = 2,  // sum / number of contributing (non-joined) ranks; integer types truncate
  kMin = 3,
  kMax = 4,
  kProduct = 5,
};

size_t dtype_size(DataType dtype);
std::string_view dtype_name(DataType dtype);
std::string_view reduce_op_name(ReduceOp op);
bool is_valid_dtype(int dtype);
bool is_valid_reduce_op(int op);

// Number of elements of a shape (1 for a scalar, the empty shape).
int64_t num_elements(const std::vector<int64_t>& shape);

// A caller-owned, contiguous, row-major tensor in host memory.
struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;

  int64_t elements() const { return num_elements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
};

struct ConstTensorView {
  const void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;

  ConstTensorView() = default;
  ConstTensorView(const void* d, DataType t, std::vector<int64_t> s)
      : data(d), dtype(t), shape(std::move(s)) {}
  ConstTensorView(const TensorView& v)  // NOLINT(google-explicit-constructor)
      : data(v.data), dtype(v.dtype), shape(v.shape) {}

  int64_t elements() const { return num_elements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
};

// A tensor the library allocated (outputs of allgather, alltoall, reducescatter).
struct OwnedTensor {
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  TensorView view() { return {bytes.data(), dtype, shape}; }
};

}  // namespace hvrun
