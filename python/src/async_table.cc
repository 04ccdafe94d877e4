#include "python/src/async_table.h"

#include <utility>

#include "python/src/calls.h"

namespace hvrun::python {
namespace {

// Attribute and method names, made once (the hot calls look them up on every tensor).
struct Names {
  py::str is_cuda{"is_cuda"}, dtype{"dtype"}, is_contiguous{"is_contiguous"},
      data_ptr{"data_ptr"}, shape{"shape"}, requires_grad{"requires_grad"};
};

const Names& names() {
  static const Names* made = new Names();  // never destroyed: outlives the interpreter's teardown
  return *made;
}

py::object attr(py::handle object, const py::str& name) {
  PyObject* value = PyObject_GetAttr(object.ptr(), name.ptr());
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

py::object call_method(py::handle object, const py::str& name) {
  PyObject* value = PyObject_CallMethodNoArgs(object.ptr(), name.ptr());
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

}  // namespace

AsyncTable::AsyncTable(py::object names_in_flight, py::dict dtype_codes)
    : names_(std::move(names_in_flight)), dtype_codes_(std::move(dtype_codes)) {
  if (!PySet_Check(names_.ptr())) throw py::type_error("AsyncTable: names_in_flight is a set");
}

std::optional<TensorView> AsyncTable::cpu_view(py::handle tensor, bool* requires_grad) const {
  if (api_) {
    TorchCpuTensor t;
    if (!api_->cpu_tensor(tensor.ptr(), &t)) return std::nullopt;
    if (requires_grad) *requires_grad = t.requires_grad;
    return TensorView{t.data, static_cast<DataType>(t.dtype),
                      std::vector<int64_t>(t.shape, t.shape + t.dims), Device::cpu(), nullptr};
  }
  const Names& n = names();
  if (requires_grad) {
    const int grad = PyObject_IsTrue(attr(tensor, n.requires_grad).ptr());
    if (grad < 0) throw py::error_already_set();
    *requires_grad = grad == 1;
  }
  if (attr(tensor, n.is_cuda).ptr() != Py_False) return std::nullopt;
  PyObject* code = PyDict_GetItemWithError(dtype_codes_.ptr(), attr(tensor, n.dtype).ptr());
  if (code == nullptr) {
    if (PyErr_Occurred()) throw py::error_already_set();
    return std::nullopt;
  }
  if (call_method(tensor, n.is_contiguous).ptr() != Py_True) return std::nullopt;
  return TensorView{data_of(tensor), static_cast<DataType>(PyLong_AsLong(code)),
                    shape_of(attr(tensor, n.shape)), Device::cpu(), nullptr};
}

void* AsyncTable::data_of(py::handle tensor) const {
  if (TorchCpuTensor t; api_ && api_->cpu_tensor(tensor.ptr(), &t)) return t.data;
  const auto data = reinterpret_cast<void*>(static_cast<uintptr_t>(
      PyLong_AsUnsignedLongLong(call_method(tensor, names().data_ptr).ptr())));
  if (PyErr_Occurred()) throw py::error_already_set();
  return data;
}

py::object AsyncTable::empty_like(py::handle tensor, py::handle empty_like) const {
  PyObject* made = api_ ? api_->empty_like(tensor.ptr())
                        : PyObject_CallOneArg(empty_like.ptr(), tensor.ptr());
  if (made == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(made);
}

void AsyncTable::use_tensor_api(py::object capsule) {
  if (capsule.is_none()) {
    api_ = nullptr;
    api_capsule_ = py::none();
    return;
  }
  auto* api = static_cast<const TorchTensorApi*>(
      PyCapsule_GetPointer(capsule.ptr(), kTorchTensorApiCapsule));
  if (api == nullptr) throw py::error_already_set();  // not that capsule (or another version)
  api_ = api;
  api_capsule_ = std::move(capsule);
}

bool AsyncTable::name_in_flight(py::handle name) const {
  const int contains = PySet_Contains(names_.ptr(), name.ptr());
  if (contains < 0) throw py::error_already_set();
  return contains == 1;
}

py::object AsyncTable::allreduce_inplace(Worker& w, py::handle name, py::handle tensor, int op,
                                         double prescale, double postscale) {
  std::optional<TensorView> view = cpu_view(tensor);
  if (!view || name_in_flight(name)) return py::none();
  Handle handle =
      w.allreduce_async(tensor_name(w, name), *view, reduce_options(op, prescale, postscale));
  if (PySet_Add(names_.ptr(), name.ptr()) != 0) throw py::error_already_set();
  const int64_t id = next_id();
  entries_.emplace(id, Entry{std::move(handle), py::reinterpret_borrow<py::object>(tensor),
                             py::reinterpret_borrow<py::object>(name)});
  return py::int_(id);
}

py::object AsyncTable::synchronize(py::handle worker, int64_t id, double timeout_s) {
  auto found = entries_.find(id);
  if (found == entries_.end()) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  Entry entry = std::move(found->second);
  entries_.erase(found);
  // The name is free again however the wait ends (a failure, Ctrl-C), as the handle is gone.
  struct Release {
    py::object& names;
    py::object& name;
    ~Release() {
      if (PySet_Discard(names.ptr(), name.ptr()) < 0) PyErr_Clear();
    }
  } release{names_, entry.name};
  const Worker* sender = worker.is_none() ? nullptr : worker.cast<const Worker*>();
  StatusTuple status = wait_handle(entry.handle, timeout_s, sender);
  if (std::get<0>(status) != 0) return py::cast(std::move(status));
  return std::move(entry.tensor);
}

py::object AsyncTable::poll(int64_t id) const {
  auto found = entries_.find(id);
  if (found == entries_.end()) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::bool_(found->second.handle.poll());
}

void AsyncTable::clear() {
  for (auto& [id, entry] : entries_)
    if (PySet_Discard(names_.ptr(), entry.name.ptr()) < 0) PyErr_Clear();
  entries_.clear();
}

void bind_async_table(py::module_& m) {
  py::class_<AsyncTable>(m, "AsyncTable")
      .def(py::init<py::object, py::dict>(), py::arg("names_in_flight"), py::arg("dtype_codes"))
      .def("next_id", &AsyncTable::next_id)
      .def("allreduce_inplace", &AsyncTable::allreduce_inplace, py::arg("worker"),
           py::arg("name"), py::arg("tensor"), py::arg("op"), py::arg("prescale"),
           py::arg("postscale"))
      .def("synchronize", &AsyncTable::synchronize, py::arg("worker"), py::arg("handle"),
           py::arg("timeout_s"))
      .def("poll", &AsyncTable::poll, py::arg("handle"))
      .def("clear", &AsyncTable::clear)
      .def("use_tensor_api", &AsyncTable::use_tensor_api, py::arg("capsule"))
      .def_property_readonly("tensor_api_active", &AsyncTable::tensor_api_active)
      .def("__len__", &AsyncTable::size);
}

}  // namespace hvrun::python
