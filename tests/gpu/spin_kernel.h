// A kernel that holds a stream until the host sets a flag: makes a collective wait for its
// caller's stream as long as a test needs (the abort path).
#pragma once

#include <cuda_runtime_api.h>

namespace hvrun::gpu_test {

// `flag` must be mapped host memory (cudaHostAlloc with cudaHostAllocMapped).
cudaError_t launch_spin_until_set(volatile int* flag, cudaStream_t stream);

}  // namespace hvrun::gpu_test
