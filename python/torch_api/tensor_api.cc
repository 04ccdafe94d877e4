// hvrun.torch._tensor_api: python/src/torch_tensor_api.h's table over PyTorch's C++ API, and
// TORCH_VERSION, the torch it was compiled against (hvrun/torch/handles.py installs the table
// only when that is the running torch).
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/csrc/autograd/python_variable.h>

#include "hvrun/types.h"
#include "python/src/torch_tensor_api.h"

#ifndef HVRUN_TORCH_VERSION
#error "HVRUN_TORCH_VERSION: the torch.__version__ this module is compiled against"
#endif

namespace hvrun::python {
namespace {

int data_type_of(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Byte: return static_cast<int>(DataType::kUInt8);
    case c10::ScalarType::Char: return static_cast<int>(DataType::kInt8);
    case c10::ScalarType::Short: return static_cast<int>(DataType::kInt16);
    case c10::ScalarType::Int: return static_cast<int>(DataType::kInt32);
    case c10::ScalarType::Long: return static_cast<int>(DataType::kInt64);
    case c10::ScalarType::Half: return static_cast<int>(DataType::kFloat16);
    case c10::ScalarType::BFloat16: return static_cast<int>(DataType::kBFloat16);
    case c10::ScalarType::Float: return static_cast<int>(DataType::kFloat32);
    case c10::ScalarType::Double: return static_cast<int>(DataType::kFloat64);
    default: return 0;
  }
}

bool cpu_tensor(PyObject* object, TorchCpuTensor* out) {
  if (!THPVariable_Check(object)) return false;
  const at::Tensor& t = THPVariable_Unpack(object);
  // A strided CPU tensor with storage (not a meta, sparse or wrapper tensor such as a
  // functorch one, whose data_ptr() would raise).
  if (!t.defined() || !t.is_cpu() || t.layout() != c10::kStrided || !t.has_storage() ||
      !t.is_contiguous())
    return false;
  const int dtype = data_type_of(t.scalar_type());
  if (dtype == 0) return false;
  out->data = t.data_ptr();
  out->dtype = dtype;
  out->shape = t.sizes().data();
  out->dims = t.sizes().size();
  out->requires_grad = t.requires_grad();
  return true;
}

PyObject* empty_like(PyObject* tensor) {
  try {
    return THPVariable_Wrap(at::empty_like(THPVariable_Unpack(tensor)));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

const TorchTensorApi kApi{&cpu_tensor, &empty_like};

PyModuleDef module_definition = {PyModuleDef_HEAD_INIT, "_tensor_api", nullptr, -1, nullptr};

}  // namespace
}  // namespace hvrun::python

PyMODINIT_FUNC PyInit__tensor_api() {
  using namespace hvrun::python;
  PyObject* module = PyModule_Create(&module_definition);
  if (module == nullptr) return nullptr;
  PyObject* capsule =
      PyCapsule_New(const_cast<TorchTensorApi*>(&kApi), kTorchTensorApiCapsule, nullptr);
  if (capsule == nullptr) {
    Py_DECREF(module);
    return nullptr;
  }
  if (PyModule_AddObject(module, "api", capsule) != 0) {  // steals the capsule on success only
    Py_DECREF(capsule);
    Py_DECREF(module);
    return nullptr;
  }
  if (PyModule_AddStringConstant(module, "TORCH_VERSION", HVRUN_TORCH_VERSION) != 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
