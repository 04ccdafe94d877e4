// The pack/unpack kernels (cuda/fusion_kernels.cu) on the host: the same transform of every
// element (neutral value for a null source, Average's division, the scale, in the same working
// types: float for float16 and bfloat16, double for the scale), so the host plane computes what
// the GPU computes.
#pragma once

#include <span>

#include "worker_lib/backends/nccl/device_plane.h"

namespace hvrun::detail::cuda {

void host_copy_segments(std::span<const Segment> segments, const SegmentTransform& transform);

// ncclAvg's last step: `count` elements at `data` divided by `ranks`.
void host_divide(void* data, size_t count, DataType dtype, int ranks);

}  // namespace hvrun::detail::cuda
