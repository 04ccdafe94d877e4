// Elementwise reductions over several sources at once, for the shared-memory data plane:
// out[i] = src[0][i] op src[1][i] op ... op src[n-1][i], always in source (rank) order, so every
// rank that reduces the same sources gets the same bits. `out` may alias any source.
// float16/bfloat16 accumulate in float32 and round once. Loops are blocked through a small
// accumulator that stays in L1 and are compiled twice (generic and AVX2, chosen at run time).
#pragma once

#include <cstddef>

#include "hvrun/types.h"

namespace hvrun::detail::shm {

// `op` is Sum (or Average, reduced as a Sum), Min, Max or Product. A non-null `copy` receives
// the result too (written from L1 in the same pass; it must not alias a source).
void reduce_sources(void* out, const void* const* sources, int n, size_t count, DataType dtype,
                    ReduceOp op, void* copy = nullptr);

// The fused allreduce's reduction (ShmBackend::allreduce_pieces): `sources` hold the work type
// (float32 for float16/bfloat16, else `dtype` itself), already prescaled; the result is divided
// by `divisor` when it is > 1 (integer types truncate) and multiplied by `postscale` in the work
// type's arithmetic (float for float32 and the half types), then written as `dtype` to `out`
// and to `copy` (either may be null). `copy` may overlap the bytes of the sources it is
// computed from at the same or higher addresses (every block is read before it is written).
void reduce_sources_finished(void* out, void* copy, const void* const* sources, int n,
                             size_t count, DataType dtype, ReduceOp op, int divisor,
                             double postscale);

}  // namespace hvrun::detail::shm
