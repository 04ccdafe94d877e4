// The handles hvrun.torch gives out (integers, as Horovod's) for the calls the extension runs
// whole: the asynchronous in-place allreduce of a contiguous CPU tensor on the global set, from
// the submission to the tensor synchronize() returns. A training step's steady state (161 named
// allreduce_async_ calls then a synchronize each, or DistributedOptimizer's hooks) then costs one
// extension call per submission and one per wait, with no Python bookkeeping in between: on a
// rank that reduces ~100 MB per step the interpreter runs each call with cold caches, so every
// bytecode saved there counts in the step.
//
// Python's registry (hvrun/torch/handles.py) keeps every other call and draws its integers from
// next_id(), so no integer is ever both; the names in flight are one Python set that both sides
// update, so a duplicate name is refused whichever side submitted the first.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "hvrun/hvrun.h"
#include "python/src/torch_tensor_api.h"

namespace hvrun::python {

namespace py = pybind11;

class AsyncTable {
 public:
  // `names_in_flight`: the registry's set of names; `dtype_codes`: {framework dtype: hvrun
  // DataType code} for the dtypes the fast path takes.
  AsyncTable(py::object names_in_flight, py::dict dtype_codes);

  int64_t next_id() { return ++last_id_; }

  // Submits the in-place allreduce of `tensor` (an object with torch's is_cuda, dtype,
  // is_contiguous(), data_ptr() and shape) as `name`, and returns its handle; None when this
  // path does not take it (a CUDA or non-contiguous tensor, a dtype not in dtype_codes, a name
  // in flight): the caller then goes the general way, which raises what needs raising.
  py::object allreduce_inplace(Worker& w, py::handle name, py::handle tensor, int op,
                               double prescale, double postscale);

  // A view of `tensor` when the fast paths take it (a contiguous CPU tensor of a dtype in
  // dtype_codes), else nothing. `requires_grad`, when given, is set to the tensor's.
  std::optional<TensorView> cpu_view(py::handle tensor, bool* requires_grad = nullptr) const;

  // The address of a CPU tensor's first element (its data_ptr()).
  void* data_of(py::handle tensor) const;

  // torch.empty_like(tensor) for a tensor cpu_view() took, through the tensor API when it is
  // installed, else by calling `empty_like`.
  py::object empty_like(py::handle tensor, py::handle empty_like) const;

  // Installs hvrun.torch._tensor_api's table (its capsule; None removes it): tensors are then
  // read in C++ instead of through their Python attributes (torch_tensor_api.h).
  void use_tensor_api(py::object capsule);
  bool tensor_api_active() const { return api_ != nullptr; }

  // Whether `name` (a str) is in flight, on either side.
  bool name_in_flight(py::handle name) const;

  // Waits for handle `id` (sending first what `worker` holds back) and returns its tensor, or
  // the final (status code, message) when it failed; NotImplemented when `id` is not one of
  // this table's. Either way the handle and its name are no longer in flight afterwards.
  py::object synchronize(py::handle worker, int64_t id, double timeout_s);

  // True or False when `id` is this table's, else NotImplemented.
  py::object poll(int64_t id) const;

  // Forgets every handle (shutdown: the library failed them).
  void clear();

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Handle handle;
    py::object tensor;  // read and written by the library until the handle completes
    py::object name;
  };
  std::unordered_map<int64_t, Entry> entries_;
  int64_t last_id_ = 0;
  py::object names_;
  py::dict dtype_codes_;
  const TorchTensorApi* api_ = nullptr;
  py::object api_capsule_;  // keeps the module's table alive
};

void bind_async_table(py::module_& m);

}  // namespace hvrun::python
