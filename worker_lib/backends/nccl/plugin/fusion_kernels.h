// Pack/unpack kernels of the GPU data plane: one launch copies a whole table of segments
// (src, dst, count), transforming each element (neutral fill, Average's division, scale).
//
// The table lives in device memory and is already split into chunks of at most
// kChunkBytes (segment_table.h: split_segments) so every block gets a similar share of work;
// block b handles chunk b. Every kernel moves 16-byte vectors where src and dst allow (a scalar
// head and tail around them), and computes in float where that gives the double result's bits
// (fusion_kernels.cu says where it does not).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "worker_lib/backends/nccl/device_plane.h"

namespace hvrun::detail::cuda {

// `chunks` device-memory segments, each at most kChunkBytes; `transform` applies to every element.
cudaError_t launch_copy_segments(const Segment* device_table, size_t chunks,
                                 const SegmentTransform& transform, cudaStream_t stream);

// True when `transform` changes no element (a plain copy): the vectorised byte path is used.
inline bool is_plain_copy(const SegmentTransform& t) { return t.scale == 1.0 && t.divisor <= 1; }

}  // namespace hvrun::detail::cuda
