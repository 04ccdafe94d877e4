// Typed packing for allreduce/reducescatter: copy a tensor into the fusion buffer applying the
// prescale, fill neutral values for joined ranks, and copy results out applying Average's
// division and the postscale. float16/bfloat16 are widened to float32 in the fusion buffer so
// the whole reduction accumulates in float32 and rounds once.
#pragma once

#include <cstddef>

#include "hvrun/types.h"

namespace hvrun::detail {

// The element type the fusion buffer holds for `dtype` (float32 for the half types).
DataType work_dtype(DataType dtype);

// dst (work type) <- src (dtype) * prescale, `count` elements.
void pack_scaled(void* dst, const void* src, size_t count, DataType dtype, double prescale);

// dst (work type) <- the identity of `op` (0 for Sum/Average, +max for Min, lowest for Max,
// 1 for Product).
void fill_neutral(void* dst, size_t count, DataType dtype, ReduceOp op);

// dst (dtype) <- src (work type), divided by `contributors` for Average (integer types
// truncate), times postscale.
void unpack_scaled(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op,
                   int contributors, double postscale);

// dst (dtype) <- src (work type) / divisor (when > 1; integer types truncate) * postscale, in
// the work type's arithmetic (float for float32 and the half types). dst may equal src.
void finish_scaled(void* dst, const void* src, size_t count, DataType dtype, int divisor,
                   double postscale);

}  // namespace hvrun::detail
