// What every call of the extension hvrun._core converts or waits the same way: tensor names
// checked as every binding checks them, shapes read from a tuple in place, reduction options,
// statuses as (code, message) tuples, and the bounded wait on a handle with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "hvrun/hvrun.h"

namespace hvrun::python {

namespace py = pybind11;

using StatusTuple = std::tuple<int, std::string>;

StatusTuple to_tuple(const Status& s);

// None for success, else the (status code, message) tuple: the hot paths build no tuple.
py::object failure_or_none(const StatusTuple& status);

AllreduceOptions reduce_options(int op, double prescale, double postscale, int process_set = 0);

// Waits for `handle` at most `timeout_s`, in slices so that Ctrl-C (a pending Python signal)
// interrupts a long wait, with the GIL released while waiting so that other Python threads
// (and gradient hooks) keep running. `sender`: first, with the GIL already released, this
// thread sends what the worker holds back (or runs it, Worker::send_pending) instead of
// waiting for the background thread to. A wait that runs out returns kDeadlineExceeded naming
// the collective and --op-timeout.
StatusTuple wait_handle(const Handle& handle, double timeout_s, const Worker* sender = nullptr);

// The blocking allreduce of CPU memory `input` into `output` (the same address: in place), as
// `name` (checked here): on the fast path when the tensor was negotiated before, else submitted
// and waited for as wait_handle waits. None when it succeeded, else (status code, message).
py::object allreduce_blocking(Worker& w, py::handle name, const void* input, void* output,
                              DataType dtype, std::vector<int64_t> shape,
                              const AllreduceOptions& options, double timeout_s);

// A tensor name from Python, checked as every binding checks it (hvrun.h): a str that is UTF-8
// text without NUL. Anything else raises hvrun.exceptions.TensorNameError (a ValueError)
// naming the rank, instead of pybind11's "incompatible function arguments" or a name changed
// on the way ("b'...'").
std::string tensor_name(const Worker& w, py::handle name);

// A shape from Python as dims: a tuple (torch.Size is one) read in place, which the hot calls
// pass; any other sequence of ints through pybind's conversion.
std::vector<int64_t> shape_of(py::handle shape);

}  // namespace hvrun::python
