#include "python/src/calls.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

namespace hvrun::python {
namespace {

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", seconds);
  return text;
}

// Raised for a name that cannot be one: no status could carry it.
[[noreturn]] void raise_name_error(const std::string& message) {
  py::object error = py::module_::import("hvrun.exceptions").attr("TensorNameError");
  PyErr_SetObject(error.ptr(), error(message, "INVALID_ARGUMENT").ptr());
  throw py::error_already_set();
}

}  // namespace

StatusTuple to_tuple(const Status& s) { return {static_cast<int>(s.code()), s.message()}; }

py::object failure_or_none(const StatusTuple& status) {
  if (std::get<0>(status) == 0) return py::none();
  return py::cast(status);
}

AllreduceOptions reduce_options(int op, double prescale, double postscale, int process_set) {
  return AllreduceOptions{.op = static_cast<ReduceOp>(op),
                          .prescale = prescale,
                          .postscale = postscale,
                          .process_set = ProcessSet{process_set}};
}

StatusTuple wait_handle(const Handle& handle, double timeout_s, const Worker* sender) {
  using namespace std::chrono;
  const auto deadline =
      steady_clock::now() + duration_cast<steady_clock::duration>(duration<double>(timeout_s));
  constexpr milliseconds kSlice{200};
  // Done already (most handles of a step, once the first wait ran the step's round): no GIL
  // hand-off, and nothing to send that a wait on an unfinished handle would not send.
  if (handle.poll()) return to_tuple(handle.wait(milliseconds(0)));
  while (true) {
    Status status;
    bool done = false;
    {
      py::gil_scoped_release release;
      if (sender != nullptr) {
        sender->send_pending();
        sender = nullptr;
        if (handle.poll()) return to_tuple(handle.wait(milliseconds(0)));
      }
      auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
      status = handle.wait(std::clamp(left, milliseconds(0), kSlice));
      done = handle.poll();
    }
    if (done) return to_tuple(status);
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (steady_clock::now() >= deadline) {
      return {static_cast<int>(StatusCode::kDeadlineExceeded),
              "collective '" + handle.name() + "' did not complete within " +
                  seconds_text(timeout_s) +
                  " s (--op-timeout; still running: some rank may not have submitted it, see "
                  "the coordinator's stall warning)"};
    }
  }
}

py::object allreduce_blocking(Worker& w, py::handle name, const void* input, void* output,
                              DataType dtype, std::vector<int64_t> shape,
                              const AllreduceOptions& options, double timeout_s) {
  const std::string checked = tensor_name(w, name);
  const TensorView out{output, dtype, std::move(shape), Device::cpu(), nullptr};
  std::optional<Status> done;
  Handle handle;
  {
    py::gil_scoped_release release;
    done = w.allreduce_now(checked, input, out, options);
    if (!done)
      handle = w.allreduce_async(checked, ConstTensorView(input, out.dtype, out.shape, out.device),
                                 out, options);
  }
  return failure_or_none(done ? to_tuple(*done) : wait_handle(handle, timeout_s, &w));
}

std::vector<int64_t> shape_of(py::handle shape) {
  if (!PyTuple_Check(shape.ptr())) return shape.cast<std::vector<int64_t>>();
  const Py_ssize_t n = PyTuple_GET_SIZE(shape.ptr());
  std::vector<int64_t> dims(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), i));
    if (d == -1 && PyErr_Occurred()) throw py::error_already_set();
    dims[static_cast<size_t>(i)] = d;
  }
  return dims;
}

std::string tensor_name(const Worker& w, py::handle name) {
  // Made only on failure: every collective call converts its name here.
  auto who = [&w] { return "rank " + std::to_string(w.rank()) + ": collective refused: "; };
  if (!PyUnicode_Check(name.ptr())) {
    raise_name_error(who() + "a tensor name is a str, not " +
                     std::string(py::str(py::type::of(name).attr("__name__"))) + " (" +
                     std::string(py::repr(name)).substr(0, 200) +
                     "); decode bytes first (names are UTF-8 text)");
  }
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(name.ptr(), &size);
  if (utf8 == nullptr) {
    PyErr_Clear();
    const std::string shown = py::reinterpret_steal<py::str>(PyObject_ASCII(name.ptr()));
    raise_name_error(who() + "tensor name " + shown.substr(0, 200) +
                     " is not valid UTF-8 text (it holds a lone surrogate, e.g. from bytes "
                     "decoded with errors='surrogateescape'); tensor names must be non-empty "
                     "UTF-8 text without NUL characters");
  }
  std::string text(utf8, static_cast<size_t>(size));
  if (Status s = validate_tensor_name(text); !s.is_ok()) raise_name_error(who() + s.message());
  return text;
}

}  // namespace hvrun::python
