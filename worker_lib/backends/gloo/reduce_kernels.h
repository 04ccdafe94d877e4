// Elementwise reduction functions in the form Gloo's allreduce takes:
// fn(out, in1, in2, count) with out[i] = op(in1[i], in2[i]).
#pragma once

#include <cstddef>
#include <functional>

#include "hvrun/types.h"

namespace hvrun::detail::gloo_backend {

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

// `dtype` is a native type (not float16/bfloat16: those are widened first); `op` is Sum, Min,
// Max or Product.
ReduceFn reduce_function(DataType dtype, ReduceOp op);

}  // namespace hvrun::detail::gloo_backend
