#include "python/src/fast_calls.h"

#include <algorithm>
#include <exception>
#include <iterator>
#include <map>
#include <string>
#include <optional>
#include <utility>

#include "python/src/async_table.h"
#include "python/src/calls.h"

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
  py::dict calls;     // name -> (op, prescale, postscale, (full name, op code, pre, post))
  py::object global_set;
  py::object raise_failure;  // raises the exception of a (code, message)
  // The blocking calls: Horovod's default op, the "no compression" object, torch.empty_like.
  py::object average_op;
  py::object no_compression;
  py::object empty_like;
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

// A function's parameter names as interned strings: a call's keywords are usually the very
// same objects (the compiler interns them), so binding compares pointers first.
template <size_t N>
struct Parameters {
  explicit Parameters(const char* const (&names)[N]) {
    for (size_t i = 0; i < N; ++i) objects[i] = interned(names[i]);
  }
  PyObject* objects[N];
};

// Binds a call's arguments to the parameters (`values` holds the defaults); false when they do
// not bind (too many, an unknown or repeated keyword): the general function raises.
template <size_t N>
bool bind(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, const Parameters<N>& p,
          PyObject** values) {
  constexpr auto count = static_cast<Py_ssize_t>(N);
  bool given[N] = {};
  if (nargs > count) return false;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    values[i] = args[i];
    given[i] = true;
  }
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* keyword = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t index = -1;
    for (Py_ssize_t i = 0; i < count && index < 0; ++i)
      if (keyword == p.objects[i]) index = i;
    for (Py_ssize_t i = 0; i < count && index < 0; ++i)
      if (PyUnicode_Compare(keyword, p.objects[i]) == 0) index = i;
    if (PyErr_Occurred()) throw py::error_already_set();
    if (index < 0 || given[index]) return false;
    values[index] = args[nargs + k];
    given[index] = true;
  }
  return values[0] != nullptr;
}

PyObject* one() {
  static PyObject* const value = PyFloat_FromDouble(1.0);  // kept for the process's life
  return value;
}

// The remembered (full name, op code, prescale, postscale) of a named call on the global set
// without average=: `calls` maps the name to (op, prescale, postscale, that tuple), the last
// such call's arguments, compared here as Python's == would; empty when there is none. Held:
// an __eq__ or a tensor's attribute may run Python that changes `calls`.
py::object remembered(const State& s, PyObject* name, PyObject* op, PyObject* prescale,
                      PyObject* postscale) {
  if (!PyUnicode_CheckExact(name)) return {};
  PyObject* found = PyDict_GetItemWithError(s.calls.ptr(), name);
  if (found == nullptr) {
    if (PyErr_Occurred()) throw py::error_already_set();
    return {};
  }
  auto entry = py::reinterpret_borrow<py::object>(found);
  if (!PyTuple_CheckExact(found) || PyTuple_GET_SIZE(found) != 4) return {};
  PyObject* const given[3] = {op, prescale, postscale};
  for (int i = 0; i < 3; ++i) {
    const int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(found, i), given[i], Py_EQ);
    if (same < 0) throw py::error_already_set();
    if (same == 0) return {};
  }
  PyObject* call = PyTuple_GET_ITEM(found, 3);
  if (!PyTuple_CheckExact(call) || PyTuple_GET_SIZE(call) != 4) return {};
  return py::reinterpret_borrow<py::object>(call);
}

AllreduceOptions options_of(PyObject* call) {
  const long op = PyLong_AsLong(PyTuple_GET_ITEM(call, 1));
  const double prescale = PyFloat_AsDouble(PyTuple_GET_ITEM(call, 2));
  const double postscale = PyFloat_AsDouble(PyTuple_GET_ITEM(call, 3));
  if (PyErr_Occurred()) throw py::error_already_set();
  return AllreduceOptions{.op = static_cast<ReduceOp>(op), .prescale = prescale,
                          .postscale = postscale};
}

// Binds (tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
// process_set=global_process_set) into `v`; false unless they bind with no average= and the
// global set (the only calls the steady state takes).
bool bind_reduce_call(const State& s, PyObject* const* args, Py_ssize_t nargs,
                      PyObject* kwnames, PyObject* (&v)[7]) {
  static const Parameters<7> kParameters({"tensor", "average", "name", "op", "prescale_factor",
                                          "postscale_factor", "process_set"});
  PyObject* defaults[7] = {nullptr, Py_None, Py_None, Py_None, one(), one(), s.global_set.ptr()};
  std::copy(std::begin(defaults), std::end(defaults), v);
  return bind(args, nargs, kwnames, kParameters, v) && v[1] == Py_None &&
         v[6] == s.global_set.ptr();
}

// allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
//                  postscale_factor=1.0, process_set=global_process_set)
PyObject* allreduce_async_entry(FastFunction* self, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kwnames) {
  const State& s = *self->state;
  PyObject* v[7];
  if (!bind_reduce_call(s, args, nargs, kwnames, v)) return call_general(s, args, nargs, kwnames);
  py::object call = remembered(s, v[2], v[3], v[4], v[5]);
  if (!call) return call_general(s, args, nargs, kwnames);
  static PyObject* const worker_name = interned("_worker");
  py::object worker = module_attribute(s, worker_name);
  if (worker.is_none()) return call_general(s, args, nargs, kwnames);
  const AllreduceOptions options = options_of(call.ptr());
  py::object handle = s.table->allreduce_inplace(
      worker.cast<Worker&>(), PyTuple_GET_ITEM(call.ptr(), 0), v[0], static_cast<int>(options.op),
      options.prescale, options.postscale);
  if (handle.is_none()) return call_general(s, args, nargs, kwnames);
  return handle.release().ptr();
}

// What the blocking steady state needs to run `call` of `source`: the worker and the source's
// view; nothing when it does not take it (no worker, the name in flight, a tensor the view
// refuses), and the caller goes to the general function.
struct BlockingCall {
  py::object worker;
  TensorView in;
};

std::optional<BlockingCall> blocking_call(const State& s, PyObject* call, PyObject* source,
                                          bool* requires_grad = nullptr) {
  static PyObject* const worker_name = interned("_worker");
  py::object worker = module_attribute(s, worker_name);
  if (worker.is_none() || s.table->name_in_flight(PyTuple_GET_ITEM(call, 0))) return std::nullopt;
  std::optional<TensorView> in = s.table->cpu_view(source, requires_grad);
  if (!in) return std::nullopt;
  return BlockingCall{std::move(worker), std::move(*in)};
}

// Runs the blocking allreduce `call` of `b.in` into `out` (the source's own bytes: in place), a
// tensor of the source's dtype and shape; returns `output`, the tensor `out` belongs to, or null
// with the call's exception set.
PyObject* run_blocking(const State& s, PyObject* call, BlockingCall& b, void* out,
                       PyObject* output) {
  static PyObject* const timeout_name = interned("_op_timeout_s");
  const double timeout_s = PyFloat_AsDouble(module_attribute(s, timeout_name).ptr());
  if (timeout_s == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  py::object failed = allreduce_blocking(b.worker.cast<Worker&>(), PyTuple_GET_ITEM(call, 0),
                                         b.in.data, out, b.in.dtype, std::move(b.in.shape),
                                         options_of(call), timeout_s);
  if (!failed.is_none()) {
    PyObject* raised = PyObject_CallOneArg(s.raise_failure.ptr(), failed.ptr());
    Py_XDECREF(raised);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "allreduce failed");
    return nullptr;
  }
  Py_INCREF(output);
  return output;
}

// allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
//            postscale_factor=1.0, process_set=global_process_set), blocking, in place.
PyObject* allreduce_inplace_entry(FastFunction* self, PyObject* const* args, Py_ssize_t nargs,
                                  PyObject* kwnames) {
  const State& s = *self->state;
  PyObject* v[7];
  if (!bind_reduce_call(s, args, nargs, kwnames, v)) return call_general(s, args, nargs, kwnames);
  py::object call =
      remembered(s, v[2], v[3] == Py_None ? s.average_op.ptr() : v[3], v[4], v[5]);
  if (!call) return call_general(s, args, nargs, kwnames);
  std::optional<BlockingCall> b = blocking_call(s, call.ptr(), v[0]);
  if (!b) return call_general(s, args, nargs, kwnames);
  return run_blocking(s, call.ptr(), *b, b->in.data, v[0]);
}

// allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
//           prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set),
// blocking, into a new tensor; a tensor autograd records a graph for goes the general way.
PyObject* allreduce_entry(FastFunction* self, PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames) {
  const State& s = *self->state;
  static const Parameters<8> kParameters({"tensor", "average", "name", "compression", "op",
                                          "prescale_factor", "postscale_factor",
                                          "process_set"});
  PyObject* v[8] = {nullptr, Py_None, Py_None, s.no_compression.ptr(), Py_None, one(), one(),
                    s.global_set.ptr()};
  if (!bind(args, nargs, kwnames, kParameters, v) || v[1] != Py_None ||
      v[3] != s.no_compression.ptr() || v[7] != s.global_set.ptr())
    return call_general(s, args, nargs, kwnames);
  py::object call =
      remembered(s, v[2], v[4] == Py_None ? s.average_op.ptr() : v[4], v[5], v[6]);
  if (!call) return call_general(s, args, nargs, kwnames);
  bool needs_grad = true;
  std::optional<BlockingCall> b = blocking_call(s, call.ptr(), v[0], &needs_grad);
  if (!b || needs_grad) return call_general(s, args, nargs, kwnames);
  // Of the source's dtype, shape and device, and contiguous as the source is (empty_like keeps
  // a dense tensor's strides): only its address is new.
  py::object output = s.table->empty_like(v[0], s.empty_like);
  return run_blocking(s, call.ptr(), *b, s.table->data_of(output), output.ptr());
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
  m.def(
      "fast_function",
      [](const std::string& kind, py::object general, py::object table, py::object state_module,
         py::object calls, py::object global_set, py::object raise_failure, py::object average_op,
         py::object no_compression, py::object empty_like) {
        const std::map<std::string, Entry> entries = {
            {"allreduce_async_", allreduce_async_entry},
            {"allreduce_", allreduce_inplace_entry},
            {"allreduce", allreduce_entry},
            {"synchronize", synchronize_entry}};
        auto entry = entries.find(kind);
        if (entry == entries.end())
          throw py::value_error("fast_function: no C steady state for '" + kind + "'");
        // What each entry reads; the rest may stay None.
        const bool reduces = kind != "synchronize";
        const bool blocking = kind == "allreduce_" || kind == "allreduce";
        auto require = [&](const py::object& value, bool needed, const char* what) {
          if (needed && value.is_none())
            throw py::value_error("fast_function('" + kind + "') needs " + what);
        };
        require(calls, reduces, "calls");
        require(global_set, reduces, "global_set");
        require(raise_failure, kind != "allreduce_async_", "raise_failure");
        require(average_op, blocking, "average_op");
        require(no_compression, kind == "allreduce", "no_compression");
        require(empty_like, kind == "allreduce", "empty_like");
        State* s = state_with_table(std::move(general), std::move(table), std::move(state_module));
        if (reduces) s->calls = calls.cast<py::dict>();
        s->global_set = std::move(global_set);
        s->raise_failure = std::move(raise_failure);
        s->average_op = std::move(average_op);
        s->no_compression = std::move(no_compression);
        s->empty_like = std::move(empty_like);
        return make_fast(entry->second, s);
      },
      py::arg("kind"), py::arg("general"), py::arg("table"), py::arg("state_module"),
      py::arg("calls") = py::none(), py::arg("global_set") = py::none(),
      py::arg("raise_failure") = py::none(), py::arg("average_op") = py::none(),
      py::arg("no_compression") = py::none(), py::arg("empty_like") = py::none(),
      "A C callable for hvrun.torch's `kind` (allreduce_async_, allreduce_, allreduce, "
      "synchronize) over the Python function `general`: `calls` maps (name, op, prescale, "
      "postscale) of a call `general` took to (full name, op code, prescale, postscale); "
      "raise_failure((code, message)) raises a failed call's exception.");
}

}  // namespace hvrun::python
