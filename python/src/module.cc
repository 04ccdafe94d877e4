// hvrun._core: the thin pybind11 layer between Python and hvrun's C++ worker API.
//
// Only the data path lives here: zero-copy views of the caller's buffers (TensorRef), submission
// of collectives, bounded waits with the GIL released, and library-allocated outputs handed back
// without a copy (a NumPy array for host memory, an object exposing __cuda_array_interface__ for
// device memory; both keep the handle, and so the bytes, alive). Horovod-API glue (names, ops,
// exceptions, framework tensors) is Python, in hvrun/ and hvrun/torch/, except the one call
// the extension runs whole because a training step makes it per tensor: the asynchronous
// in-place allreduce of a CPU tensor and its wait (async_table.h, fast_calls.h).
//
// Errors never raise here: init and wait return (code, message) and the Python side picks the
// exception, so one place maps hvrun's status codes onto Python's exception classes. The one
// exception is a tensor name that cannot be one (tensor_name, calls.h): it raises TensorNameError
// at submission, as no status could carry a name that cannot be converted.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hvrun/autopsy.h"
#include "hvrun/build_info.h"
#include "hvrun/checkpoint.h"
#include "hvrun/hvrun.h"
#include "python/src/async_table.h"
#include "python/src/calls.h"
#include "python/src/fast_calls.h"
#include "python/src/tensor_ref.h"

namespace py = pybind11;

namespace hvrun::python {

std::string array_typestr(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return "|u1";
    case DataType::kInt8: return "|i1";
    case DataType::kInt16: return "<i2";
    case DataType::kInt32: return "<i4";
    case DataType::kInt64: return "<i8";
    case DataType::kFloat16: return "<f2";
    case DataType::kBFloat16: return "<i2";
    case DataType::kFloat32: return "<f4";
    case DataType::kFloat64: return "<f8";
  }
  return "|u1";
}

namespace {

// A library-allocated CUDA output, for torch.as_tensor(obj, device="cuda"): the object owns a
// copy of the handle, so the device memory lives as long as the tensor viewing it.
struct DeviceOutput {
  Handle handle;
  py::dict interface() const {
    TensorView v = handle.output();
    py::dict d;
    d["shape"] = py::tuple(py::cast(v.shape));
    d["typestr"] = array_typestr(v.dtype);
    d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(v.data), false);
    d["version"] = 2;  // no "stream" key: the result is ready on the input's stream already
    return d;
  }
};

// The output of a completed allgather/alltoall/reducescatter, without a copy.
py::object handle_output(const Handle& handle) {
  TensorView v = handle.output();
  if (v.device.is_cuda()) return py::cast(DeviceOutput{handle});
  auto* owner = new Handle(handle);
  py::capsule base(owner, [](void* p) { delete static_cast<Handle*>(p); });
  std::vector<py::ssize_t> shape(v.shape.begin(), v.shape.end());
  py::dtype dtype(array_typestr(v.dtype));
  if (v.data == nullptr) {
    // An empty result: NumPy wants a valid pointer even for zero bytes.
    return py::array(dtype, shape, std::vector<py::ssize_t>{});
  }
  return py::array(dtype, shape, {}, v.data, base);
}

std::tuple<std::unique_ptr<Worker>, int, std::string> init_worker() {
  std::optional<Result<std::unique_ptr<Worker>>> worker;
  {
    py::gil_scoped_release release;  // registration blocks until every rank arrived
    worker.emplace(Worker::init());
  }
  if (!worker->is_ok()) {
    auto [code, message] = to_tuple(worker->status());
    return {nullptr, code, message};
  }
  return {std::move(*worker).value(), 0, ""};
}

}  // namespace
}  // namespace hvrun::python

namespace {

// hvrun's autopsies ask for every Python thread's stack through this (hvrun/autopsy.h), on a
// thread of the library's: it takes the GIL (the library bounds the wait) and calls `stacks`,
// which returns [(native_id, name, [(function, file, line), ...innermost first]), ...].
// `stacks` is kept referenced for the process's life: dropping it would need the GIL.
void set_stack_provider(py::object stacks) {
  if (stacks.is_none()) {
    hvrun::set_interpreter_stack_provider(nullptr);
    return;
  }
  PyObject* callable = stacks.release().ptr();
  hvrun::set_interpreter_stack_provider([callable]() {
    std::vector<hvrun::InterpreterThread> threads;
    if (!Py_IsInitialized()) return threads;
    py::gil_scoped_acquire gil;
    try {
      py::list listed = py::reinterpret_borrow<py::object>(callable)();
      for (py::handle item : listed) {
        auto entry = item.cast<py::tuple>();
        hvrun::InterpreterThread thread;
        thread.native_thread_id = entry[0].cast<int64_t>();
        thread.name = entry[1].cast<std::string>();
        for (py::handle f : entry[2].cast<py::list>()) {
          auto frame = f.cast<py::tuple>();
          thread.frames.push_back(hvrun::InterpreterFrame{frame[0].cast<std::string>(),
                                                          frame[1].cast<std::string>(),
                                                          frame[2].cast<int>()});
        }
        threads.push_back(std::move(thread));
      }
    } catch (py::error_already_set& error) {
      error.restore();
      PyErr_Clear();
    } catch (const std::exception&) {
    }
    return threads;
  });
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  using namespace hvrun;
  using namespace hvrun::python;
  m.doc() = "hvrun's worker library (C++), as the hvrun Python packages use it";

  m.def("version", [] { return std::string(hvrun::version()); });
  bind_async_table(m);
  bind_fast_calls(m);
  m.def("_set_stack_provider", &set_stack_provider, py::arg("stacks"));
  m.def("cuda_built", [] { return build_info().have_cuda; });
  m.def("nccl_version_code", [] { return build_info().have_nccl ? build_info().nccl_version_code : 0; });
  m.def("mpi_built", [] { return build_info().have_mpi; });
  // The worker's default wait bound (HVRUN_OP_TIMEOUT, --op-timeout), as Worker::wait uses it.
  m.def("op_timeout_s", [] {
    auto config = Config::from_environment();
    return config.is_ok() ? static_cast<double>(config->op_timeout.count()) / 1000.0 : 300.0;
  });

  py::class_<TensorRef>(m, "TensorRef")
      .def(py::init([](uintptr_t data, int dtype, std::vector<int64_t> shape, int device, uintptr_t stream) {
             return TensorRef{data, dtype, std::move(shape), device, stream};
           }),
           py::arg("data"), py::arg("dtype"), py::arg("shape"), py::arg("device") = -1,
           py::arg("stream") = 0)
      .def_readonly("data", &TensorRef::data)
      .def_readonly("dtype", &TensorRef::dtype)
      .def_readonly("shape", &TensorRef::shape)
      .def_readonly("device", &TensorRef::device);

  py::class_<DeviceOutput>(m, "DeviceOutput")
      .def_property_readonly("__cuda_array_interface__", &DeviceOutput::interface);

  py::class_<Handle>(m, "Handle")
      .def_property_readonly("name", &Handle::name)
      .def("poll", &Handle::poll)
      .def("wait", [](const Handle& h, double timeout_s) { return wait_handle(h, timeout_s); },
           py::arg("timeout_s"))
      .def("output", &handle_output)
      .def("received_splits", &Handle::received_splits)
      .def("join_result", &Handle::join_result)
      .def("joined_ranks", &Handle::joined_ranks);

  py::class_<Worker, std::unique_ptr<Worker>>(m, "Worker")
      .def_static("init", &init_worker,
                  "Registers with the job's coordinator (HVRUN_* environment); returns "
                  "(worker or None, status code, message).")
      .def("shutdown",
           [](Worker& w) {
             py::gil_scoped_release release;
             return to_tuple(w.shutdown());
           })
      // The atexit path of a rank ending with an uncaught exception: a failure, not Goodbye.
      .def("shutdown_with_failure",
           [](Worker& w, const std::string& reason) {
             py::gil_scoped_release release;
             return to_tuple(w.shutdown_with_failure(reason));
           })
      .def("abort", &Worker::abort, py::arg("reason"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("rank", &Worker::rank)
      .def_property_readonly("size", &Worker::size)
      .def_property_readonly("local_rank", &Worker::local_rank)
      .def_property_readonly("local_size", &Worker::local_size)
      .def_property_readonly("cross_rank", &Worker::cross_rank)
      .def_property_readonly("cross_size", &Worker::cross_size)
      .def_property_readonly("job_id", &Worker::job_id)
      .def_property_readonly("rank_hosts", &Worker::rank_hosts)
      // For native extensions of this process that use the C++ API on the same worker (the
      // TensorFlow op library attaches it): valid until shutdown() returns.
      .def_property_readonly("address", [](Worker& w) { return reinterpret_cast<uintptr_t>(&w); })
      .def("allreduce_async",
           [](Worker& w, py::handle name, const TensorRef& input, const TensorRef& output,
              int op, double prescale, double postscale, int process_set) {
             return w.allreduce_async(tensor_name(w, name), input.const_view(), output.view(),
                                      reduce_options(op, prescale, postscale, process_set));
           },
           py::arg("name"), py::arg("input"), py::arg("output"), py::arg("op"),
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("process_set") = 0)
      // For blocking calls: runs on the fast path (no coordinator) when the tensor was
      // negotiated before, returning a completed handle; else submits. Python then waits
      // through Handle.wait, which Ctrl-C interrupts.
      .def("allreduce_now_or_async",
           [](Worker& w, py::handle name, const TensorRef& input, const TensorRef& output,
              int op, double prescale, double postscale) {
             const std::string checked = tensor_name(w, name);
             py::gil_scoped_release release;
             return w.allreduce_now_or_async(checked, input.const_view(), output.view(),
                                             reduce_options(op, prescale, postscale));
           },
           py::arg("name"), py::arg("input"), py::arg("output"), py::arg("op"),
           py::arg("prescale") = 1.0, py::arg("postscale") = 1.0)
      // The blocking allreduce of a contiguous CPU tensor into another (input == output: in
      // place) in one call, from addresses, dtype code and shape (TensorRef objects and a
      // handle would cost most of a fast-path call): the fast path when it applies, else the
      // submission and the wait (interruptible, as Handle.wait). Returns None when it
      // succeeded, else the final (status code, message) (no tuple on the hot path).
      .def("allreduce_blocking",
           [](Worker& w, py::handle name, uintptr_t input, uintptr_t output, int dtype,
              py::handle shape, int op, double prescale, double postscale,
              double timeout_s) -> py::object {
             return hvrun::python::allreduce_blocking(
                 w, name, reinterpret_cast<const void*>(input), reinterpret_cast<void*>(output),
                 static_cast<DataType>(dtype), shape_of(shape),
                 reduce_options(op, prescale, postscale), timeout_s);
           },
           py::arg("name"), py::arg("input"), py::arg("output"), py::arg("dtype"),
           py::arg("shape"), py::arg("op"), py::arg("prescale"), py::arg("postscale"),
           py::arg("timeout_s"))
      // The async in-place allreduce of a contiguous CPU tensor from its address, dtype code
      // and shape (no TensorRef objects), as allreduce_blocking takes it.
      .def("allreduce_inplace_async",
           [](Worker& w, py::handle name, uintptr_t data, int dtype, py::handle shape, int op,
              double prescale, double postscale) {
             const TensorRef inout{data, dtype, shape_of(shape), -1, 0};
             return w.allreduce_async(tensor_name(w, name), inout.view(),
                                      reduce_options(op, prescale, postscale));
           },
           py::arg("name"), py::arg("data"), py::arg("dtype"), py::arg("shape"), py::arg("op"),
           py::arg("prescale"), py::arg("postscale"))
      // Waits for a handle as Handle.wait does, after sending (or running) what this rank holds
      // back, in the same GIL release. None when it succeeded, else (status code, message).
      .def("wait",
           [](const Worker& w, const Handle& handle, double timeout_s) {
             return failure_or_none(wait_handle(handle, timeout_s, &w));
           },
           py::arg("handle"), py::arg("timeout_s"))
      .def("grouped_allreduce_async",
           [](Worker& w, const py::sequence& name_objects, const std::vector<TensorRef>& tensors,
              int op, double prescale, double postscale, int process_set) {
             // A str is a sequence too: split into one-character names it would run silently.
             if (py::isinstance<py::str>(name_objects) || py::isinstance<py::bytes>(name_objects))
               throw py::type_error("grouped_allreduce_async: names must be a list of str, not one "
                                    "string");
             std::vector<std::string> names;
             for (py::handle n : name_objects) names.push_back(tensor_name(w, n));
             std::vector<TensorView> views;
             for (const auto& t : tensors) views.push_back(t.view());
             return w.grouped_allreduce_async(names, views,
                                              reduce_options(op, prescale, postscale, process_set));
           },
           py::arg("names"), py::arg("tensors"), py::arg("op"), py::arg("prescale") = 1.0,
           py::arg("postscale") = 1.0, py::arg("process_set") = 0)
      .def("allgather_async",
           [](Worker& w, py::handle name, const TensorRef& input, int process_set) {
             return w.allgather_async(tensor_name(w, name), input.const_view(),
                                      ProcessSet{process_set});
           },
           py::arg("name"), py::arg("input"), py::arg("process_set") = 0)
      .def("broadcast_async",
           [](Worker& w, py::handle name, const TensorRef& inout, int root_rank, int process_set) {
             return w.broadcast_async(tensor_name(w, name), inout.view(), root_rank,
                                      ProcessSet{process_set});
           },
           py::arg("name"), py::arg("inout"), py::arg("root_rank"), py::arg("process_set") = 0)
      .def("alltoall_async",
           [](Worker& w, py::handle name, const TensorRef& input, std::vector<int64_t> splits,
              int process_set) {
             return w.alltoall_async(tensor_name(w, name), input.const_view(), splits,
                                     ProcessSet{process_set});
           },
           py::arg("name"), py::arg("input"), py::arg("splits"), py::arg("process_set") = 0)
      .def("reducescatter_async",
           [](Worker& w, py::handle name, const TensorRef& input, int op, double prescale,
              double postscale, int process_set) {
             return w.reducescatter_async(tensor_name(w, name), input.const_view(),
                                          reduce_options(op, prescale, postscale, process_set));
           },
           py::arg("name"), py::arg("input"), py::arg("op"), py::arg("prescale") = 1.0,
           py::arg("postscale") = 1.0, py::arg("process_set") = 0)
      .def("barrier_async",
           [](Worker& w, int process_set) { return w.barrier_async(ProcessSet{process_set}); },
           py::arg("process_set") = 0)
      // Process sets (every rank calls add/remove in the same order): the new id, the
      // members; errors raise RuntimeError with the library's message.
      .def("add_process_set",
           [](Worker& w, std::vector<int> ranks) {
             Result<ProcessSet> set = [&] {
               py::gil_scoped_release release;
               return w.add_process_set(ranks);
             }();
             if (!set.is_ok()) throw std::invalid_argument(set.status().message());
             return set->id;
           })
      .def("remove_process_set",
           [](Worker& w, int id) {
             Status s = [&] {
               py::gil_scoped_release release;
               return w.remove_process_set(ProcessSet{id});
             }();
             if (!s.is_ok()) throw std::invalid_argument(s.message());
           })
      .def("process_set_ranks",
           [](Worker& w, int id) -> std::optional<std::vector<int>> {
             auto ranks = w.process_set_ranks(ProcessSet{id});
             if (!ranks.is_ok()) return std::nullopt;
             return *ranks;
           })
      .def("join_async", &Worker::join_async)
      // Telemetry (docs/timeline.md, docs/metrics.md): steps and their named phases, and the
      // job's timeline at run time.
      .def("mark_step", &Worker::mark_step)
      .def("mark_phase", [](Worker& w, const std::string& name) { w.mark_phase(name); })
      .def("start_timeline",
           [](Worker& w, const std::string& path) {
             py::gil_scoped_release release;
             return to_tuple(w.start_timeline(path));
           })
      .def("stop_timeline", [](Worker& w) {
        py::gil_scoped_release release;
        return to_tuple(w.stop_timeline());
      })
      // Elastic jobs (docs/elastic.md): slots were added; reset at the next commit.
      .def("hosts_updated", &Worker::hosts_updated);

  // Checkpoints (hvrun/checkpoint.h); None arguments come from hvrun's --checkpoint-* settings.
  py::class_<Checkpointer>(m, "Checkpointer")
      .def(py::init([](Worker& w, std::optional<std::string> directory, std::optional<int64_t> every,
                       std::optional<int> keep, std::optional<std::string> run_name) {
             auto options = CheckpointOptions::from_environment();
             if (!options.is_ok()) throw std::invalid_argument(options.status().message());
             if (directory) options->directory = *directory;
             if (every) options->every = *every;
             if (keep) options->keep = *keep;
             if (run_name) options->run_name = *run_name;
             return std::make_unique<Checkpointer>(w, *options);
           }),
           py::arg("worker"), py::arg("directory") = py::none(), py::arg("every") = py::none(),
           py::arg("keep") = py::none(), py::arg("run_name") = py::none(),
           py::keep_alive<1, 2>())
      .def_property_readonly("enabled", &Checkpointer::enabled)
      .def_property_readonly("directory", [](const Checkpointer& c) { return c.options().directory; })
      .def_property_readonly("every", [](const Checkpointer& c) { return c.options().every; })
      .def("add",
           [](Checkpointer& c, const std::string& name, uintptr_t data, size_t bytes) {
             return to_tuple(c.add(name, reinterpret_cast<void*>(data), bytes));
           })
      .def("save",
           [](Checkpointer& c, int64_t step, bool only_if_due) {
             py::gil_scoped_release release;
             auto path = only_if_due ? c.save_if_due(step) : c.save(step);
             return std::make_tuple(path.is_ok() ? *path : std::string(),
                                    static_cast<int>(path.status().code()), path.status().message());
           },
           py::arg("step"), py::arg("only_if_due"))
      .def("restore", [](Checkpointer& c) {
        py::gil_scoped_release release;
        auto restored = c.restore();
        int64_t step = restored.is_ok() && *restored ? **restored : -1;
        return std::make_tuple(step, static_cast<int>(restored.status().code()),
                               restored.status().message());
      });
}
