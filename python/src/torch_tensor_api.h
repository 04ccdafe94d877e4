// What hvrun._core's steady-state calls ask of a torch.Tensor, answered in C++ by the optional
// module hvrun.torch._tensor_api (python/torch_api/), which is compiled against the installed
// PyTorch's C++ API. Without it each answer is a Python attribute or method call on the tensor
// (is_cuda, dtype, is_contiguous(), data_ptr(), shape, requires_grad, torch.empty_like): some
// 40-60 ns each, ~0.5 us per blocking call out of ~1-2 us. The module hands this table over in
// a capsule; hvrun.torch installs it only when the running torch is the version it was built
// against (PyTorch's C++ ABI changes between releases), and every call works without it.
//
// Plain C++ with no PyTorch or pybind11 types, so both sides can include it.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>

namespace hvrun::python {

// Bumped on any change of the structs below; the capsule's name carries it.
inline constexpr char kTorchTensorApiCapsule[] = "hvrun.torch._tensor_api.v1";

struct TorchCpuTensor {
  void* data = nullptr;
  int dtype = 0;                    // hvrun::DataType's value
  const int64_t* shape = nullptr;   // the tensor's sizes, valid while the tensor lives
  size_t dims = 0;
  bool requires_grad = false;
};

struct TorchTensorApi {
  // True with *out filled for a contiguous CPU tensor of a dtype hvrun reduces (uint8, int8,
  // int16, int32, int64, float16, bfloat16, float32, float64); false for anything else,
  // including objects that are not tensors. Never raises.
  bool (*cpu_tensor)(PyObject* object, TorchCpuTensor* out);
  // torch.empty_like(tensor) for a tensor cpu_tensor() took: a new reference, or null with a
  // Python exception set.
  PyObject* (*empty_like)(PyObject* tensor);
};

}  // namespace hvrun::python
