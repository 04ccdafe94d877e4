// What every GPU test needs: whether this machine has a usable GPU, and why not.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace hvrun::gpu_test {

// Empty when a GPU is usable; otherwise the reason (driver missing, no device, ...).
inline std::string no_gpu_reason() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return std::string("no usable GPU on this machine (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ")";
  if (count == 0) return "no CUDA device on this machine";
  return {};
}

#define HVRUN_SKIP_WITHOUT_GPU()                                          \
  do {                                                                   \
    if (std::string why = ::hvrun::gpu_test::no_gpu_reason(); !why.empty()) \
      GTEST_SKIP() << why;                                               \
  } while (0)

}  // namespace hvrun::gpu_test
