// Element types, reduction operators and tensor views of hvrun's public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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
  kInt16 = 9,  // added after the others: the numbers are the wire's and the C API's
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

// Where a tensor's bytes live. Values match the C API's hvrun_device_type_t.
enum class DeviceType : int { kCpu = 0, kCuda = 1 };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = -1;  // CUDA device ordinal (as the process sees it); -1 for host memory

  static Device cpu() { return {}; }
  static Device cuda(int ordinal) { return {DeviceType::kCuda, ordinal}; }
  bool is_cuda() const { return type == DeviceType::kCuda; }
  friend bool operator==(const Device&, const Device&) = default;
};

std::string_view device_type_name(DeviceType type);

// A caller-owned, contiguous, row-major tensor in host memory (device = cpu, the default) or
// in CUDA device memory (device = cuda(ordinal), data a device pointer).
//
// stream (CUDA only; a cudaStream_t, nullptr = the legacy default stream): the data is ready
// once the work queued on `stream` before the submission has run. The library makes its own
// stream wait for `stream` (an event, no host synchronisation; recorded when the background
// thread runs the collective, so work queued after the submission is waited for too: correct,
// but that work does not overlap the collective yet), runs the collective there,
// and makes `stream` wait for the collective before the handle completes: work the caller
// queues on `stream` after the handle completed sees the result. (Handle completion itself
// means the collective finished on the GPU too.) A CUDA tensor needs a build with CUDA
// (`hvrun --check-build`) and libhvrun_cuda.so plus NCCL at run time.
struct TensorView {
  void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  Device device;
  void* stream = nullptr;

  int64_t elements() const { return num_elements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
};

struct ConstTensorView {
  const void* data = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  Device device;
  void* stream = nullptr;

  ConstTensorView() = default;
  ConstTensorView(const void* d, DataType t, std::vector<int64_t> s, Device dev = {},
                  void* strm = nullptr)
      : data(d), dtype(t), shape(std::move(s)), device(dev), stream(strm) {}
  ConstTensorView(const TensorView& v)  // NOLINT(google-explicit-constructor)
      : data(v.data), dtype(v.dtype), shape(v.shape), device(v.device), stream(v.stream) {}

  int64_t elements() const { return num_elements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
};

// Allocates `bytes` of device memory on `device` for a library-allocated output (allgather,
// alltoall, reducescatter of CUDA tensors), usable in stream order on `stream`. Returns the
// allocation as a shared_ptr whose deleter frees it (nullptr = out of memory). Called on the
// worker's background thread. Frameworks set one (Config::device_allocator) so outputs come
// from their caching allocator; without one the library uses cudaMallocAsync on `stream`.
using DeviceAllocator =
    std::function<std::shared_ptr<void>(Device device, size_t bytes, void* stream)>;

// A tensor the library allocated (outputs of allgather, alltoall, reducescatter).
//  * Host inputs: the bytes live in `bytes` (device = cpu).
//  * CUDA inputs: the bytes live in `device_memory` on the input's device (`bytes` stays empty),
//    ready in stream order on `stream` (the input's stream). Without a Config::device_allocator
//    the memory is freed with cudaFreeAsync on `stream` when the last copy of the OwnedTensor
//    (and of the handle holding it) goes: a caller that used it on another stream synchronises
//    that stream first.
struct OwnedTensor {
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  Device device;
  std::shared_ptr<void> device_memory;
  void* stream = nullptr;

  void* data() { return device.is_cuda() ? device_memory.get() : bytes.data(); }
  TensorView view() { return {data(), dtype, shape, device, stream}; }
};

}  // namespace hvrun
