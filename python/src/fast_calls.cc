#include "python/src/fast_calls.h"

#include <exception>
#include <utility>

#include "python/src/async_table.h"

namespace hvrun::python {
namespace {

namespace py = pybind11;

// A callable with a C entry point (vectorcall) and a __dict__ for the attributes a function
// has. `call` reads `state`; `general` is the Python implementation behind it.
struct FastFunction;
using Entry = PyObject* (*)(FastFunction*, PyObject* const*, Py_ssize_t, PyObject*);

struct State {
  py::object general;
  py::object table_object;
  AsyncTable* table = nullptr;
  py::object module;  // hvrun._state: the worker and the op timeout, read on every call
  py::dict calls;     // allreduce_async_: (name, op, prescale, postscale) -> (full, op, pre, post)
  py::object global_set;
  py::object raise_failure;  // synchronize: raises the exception of a (code, message)
};

struct FastFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* dict;
  Entry entry;
  State* state;
};

PyObject* fast_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                          PyObject* kwnames) {
  auto* self = reinterpret_cast<FastFunction*>(callable);
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  try {
    return self->entry(self, args, nargs, kwnames);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

void fast_dealloc(PyObject* object) {
  auto* self = reinterpret_cast<FastFunction*>(object);
  PyObject_GC_UnTrack(object);
  Py_CLEAR(self->dict);
  delete self->state;
  Py_TYPE(object)->tp_free(object);
}

int fast_traverse(PyObject* object, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<FastFunction*>(object)->dict);
  return 0;
}

int fast_clear(PyObject* object) {
  Py_CLEAR(reinterpret_cast<FastFunction*>(object)->dict);
  return 0;
}

// "<function NAME>", as a Python function shows itself, NAME from the attributes
// functools.update_wrapper copied.
PyObject* fast_repr(PyObject* object) {
  PyObject* dict = reinterpret_cast<FastFunction*>(object)->dict;
  PyObject* name = dict != nullptr ? PyDict_GetItemString(dict, "__qualname__") : nullptr;
  if (name == nullptr) return PyUnicode_FromFormat("<hvrun fast function at %p>", object);
  return PyUnicode_FromFormat("<function %S (steady state in C)>", name);
}

PyGetSetDef fast_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* fast_function_type() {
  static PyTypeObject* type = [] {
    static PyTypeObject t = {PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "hvrun._core.FastFunction";
    t.tp_basicsize = sizeof(FastFunction);
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC;
    t.tp_vectorcall_offset = offsetof(FastFunction, vectorcall);
    t.tp_dictoffset = offsetof(FastFunction, dict);
    t.tp_call = PyVectorcall_Call;
    t.tp_dealloc = fast_dealloc;
    t.tp_traverse = fast_traverse;
    t.tp_clear = fast_clear;
    t.tp_getset = fast_getset;
    t.tp_repr = fast_repr;
    t.tp_doc = "A function of hvrun.torch with its steady state in C (hvrun/_core fast_calls).";
    if (PyType_Ready(&t) < 0) throw py::error_already_set();
    return &t;
  }();
  return type;
}

py::object make_fast(Entry entry, State* state) {
  auto* self = PyObject_GC_New(FastFunction, fast_function_type());
  if (self == nullptr) {
    delete state;
    throw py::error_already_set();
  }
  self->vectorcall = fast_vectorcall;
  self->dict = nullptr;
  self->entry = entry;
  self->state = state;
  PyObject_GC_Track(self);
  return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(self));
}

PyObject* call_general(const State& s, PyObject* const* args, Py_ssize_t nargs,
                       PyObject* kwnames) {
  return PyObject_Vectorcall(s.general.ptr(), args, static_cast<size_t>(nargs), kwnames);
}

PyObject* interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw py::error_already_set();
  return s;  // kept for the process's life
}

py::object module_attribute(const State& s, PyObject* name) {
  PyObject* value = PyObject_GetAttr(s.module.ptr(), name);
  if (value == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(value);
}

// allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
//                  postscale_factor=1.0, process_set=global_process_set)
PyObject* allreduce_async_entry(FastFunction* self, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kwnames) {
  const State& s = *self->state;
  static const char* const kParameters[] = {"tensor", "average", "name", "op",
                                            "prescale_factor", "postscale_factor",
                                            "process_set"};
  constexpr Py_ssize_t kCount = 7;
  static PyObject* const one = PyFloat_FromDouble(1.0);
  PyObject* values[kCount] = {nullptr, Py_None, Py_None, Py_None, one, one, s.global_set.ptr()};
  bool given[kCount] = {};
  if (nargs > kCount) return call_general(s, args, nargs, kwnames);
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    values[i] = args[i];
    given[i] = true;
  }
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* keyword = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t index = -1;
    for (Py_ssize_t i = 0; i < kCount && index < 0; ++i)
      if (PyUnicode_CompareWithASCIIString(keyword, kParameters[i]) == 0) index = i;
    if (index < 0 || given[index]) return call_general(s, args, nargs, kwnames);  // it raises
    values[index] = args[nargs + k];
    given[index] = true;
  }
  PyObject* tensor = values[0];
  PyObject* name = values[2];
  if (tensor == nullptr || values[1] != Py_None || values[6] != s.global_set.ptr() ||
      !PyUnicode_CheckExact(name))
    return call_general(s, args, nargs, kwnames);
  py::object key = py::reinterpret_steal<py::object>(PyTuple_Pack(4, name, values[3],
                                                                   values[4], values[5]));
  if (!key) throw py::error_already_set();
  PyObject* call = PyDict_GetItemWithError(s.calls.ptr(), key.ptr());
  if (call == nullptr) {
    if (PyErr_Occurred()) throw py::error_already_set();
    return call_general(s, args, nargs, kwnames);
  }
  static PyObject* const worker_name = interned("_worker");
  py::object worker = module_attribute(s, worker_name);
  if (worker.is_none()) return call_general(s, args, nargs, kwnames);
  const long op = PyLong_AsLong(PyTuple_GET_ITEM(call, 1));
  const double prescale = PyFloat_AsDouble(PyTuple_GET_ITEM(call, 2));
  const double postscale = PyFloat_AsDouble(PyTuple_GET_ITEM(call, 3));
  if (PyErr_Occurred()) throw py::error_already_set();
  py::object handle = s.table->allreduce_inplace(worker.cast<Worker&>(),
                                                 PyTuple_GET_ITEM(call, 0), tensor,
                                                 static_cast<int>(op), prescale, postscale);
  if (handle.is_none()) return call_general(s, args, nargs, kwnames);
  return handle.release().ptr();
}

// synchronize(handle)
PyObject* synchronize_entry(FastFunction* self, PyObject* const* args, Py_ssize_t nargs,
                            PyObject* kwnames) {
  const State& s = *self->state;
  if (nargs != 1 || kwnames != nullptr || !PyLong_CheckExact(args[0]))
    return call_general(s, args, nargs, kwnames);
  const long long id = PyLong_AsLongLong(args[0]);
  if (id == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return call_general(s, args, nargs, kwnames);
  }
  static PyObject* const worker_name = interned("_worker");
  static PyObject* const timeout_name = interned("_op_timeout_s");
  const double timeout_s = PyFloat_AsDouble(module_attribute(s, timeout_name).ptr());
  if (timeout_s == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  py::object result = s.table->synchronize(module_attribute(s, worker_name), id, timeout_s);
  if (result.ptr() == Py_NotImplemented) return call_general(s, args, nargs, kwnames);
  if (PyTuple_Check(result.ptr())) return PyObject_CallOneArg(s.raise_failure.ptr(), result.ptr());
  return result.release().ptr();
}

State* state_with_table(py::object general, py::object table, py::object module) {
  auto* s = new State();
  s->general = std::move(general);
  s->table = &table.cast<AsyncTable&>();
  s->table_object = std::move(table);
  s->module = std::move(module);
  return s;
}

}  // namespace

void bind_fast_calls(py::module_& m) {
  m.def("fast_allreduce_async_",
        [](py::object general, py::object table, py::dict calls, py::object global_set,
           py::object state_module) {
          State* s = state_with_table(std::move(general), std::move(table),
                                      std::move(state_module));
          s->calls = std::move(calls);
          s->global_set = std::move(global_set);
          return make_fast(allreduce_async_entry, s);
        },
        py::arg("general"), py::arg("table"), py::arg("calls"), py::arg("global_set"),
        py::arg("state_module"),
        "allreduce_async_ with its steady state in C: `calls` maps (name, op, prescale, "
        "postscale) of a call `general` took to (full name, op code, prescale, postscale).");
  m.def("fast_synchronize",
        [](py::object general, py::object table, py::object state_module,
           py::object raise_failure) {
          State* s = state_with_table(std::move(general), std::move(table),
                                      std::move(state_module));
          s->raise_failure = std::move(raise_failure);
          return make_fast(synchronize_entry, s);
        },
        py::arg("general"), py::arg("table"), py::arg("state_module"),
        py::arg("raise_failure"),
        "synchronize with the table's handles waited for in C; raise_failure((code, message)) "
        "raises a failed one's exception.");
}

}  // namespace hvrun::python
