// hvrun.torch's allreduce_async_, synchronize, allreduce_ and allreduce as C callables: a
// training step calls them once per tensor, and a Python function's frame, keyword binding and
// attribute lookups cost more there than the collective's own submission. Each takes the
// steady state (a named call of a contiguous CPU tensor on the global set, made before with the
// same op and scaling; the wait on an AsyncTable handle) straight to the worker and the
// extension's AsyncTable, and hands every other call, unchanged, to the Python function it
// wraps, which raises what needs raising. The callables take attributes (functools.
// update_wrapper gives them the wrapped function's name, docstring and signature, through
// __wrapped__).
#pragma once

#include <pybind11/pybind11.h>

namespace hvrun::python {

void bind_fast_calls(pybind11::module_& m);

}  // namespace hvrun::python
