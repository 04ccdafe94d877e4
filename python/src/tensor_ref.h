// TensorRef: how Python describes a tensor to the extension without the extension knowing
// NumPy or PyTorch. The Python side passes the address of a contiguous buffer it keeps alive
// (numpy `__array_interface__`, torch `data_ptr()`), the dtype code, the shape, and for CUDA
// tensors the device ordinal and the stream the data is ready on. The C++ side only builds
// views over that memory: no copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hvrun/types.h"

namespace hvrun::python {

struct TensorRef {
  uintptr_t data = 0;
  int dtype = static_cast<int>(DataType::kFloat32);
  std::vector<int64_t> shape;
  int device = -1;       // CUDA ordinal; -1: host memory
  uintptr_t stream = 0;  // cudaStream_t of a CUDA tensor (0: the legacy default stream)

  Device device_of() const { return device < 0 ? Device::cpu() : Device::cuda(device); }

  TensorView view() const {
    return TensorView{reinterpret_cast<void*>(data), static_cast<DataType>(dtype), shape,
                      device_of(), reinterpret_cast<void*>(stream)};
  }
  ConstTensorView const_view() const { return ConstTensorView(view()); }
};

// NumPy-style type string of a dtype ("<f4"); bfloat16 travels as "<i2" (NumPy has none, and
// torch.from_numpy takes int16 but not uint16); the Python side views it back as bfloat16.
std::string array_typestr(DataType dtype);

}  // namespace hvrun::python
