#include "tests/gpu/spin_kernel.h"

namespace hvrun::gpu_test {
namespace {

__global__ void spin_until_set(volatile int* flag) {
  while (*flag == 0) {
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t launch_spin_until_set(volatile int* flag, cudaStream_t stream) {
  spin_until_set<<<1, 1, 0, stream>>>(flag);
  return cudaGetLastError();
}

}  // namespace hvrun::gpu_test
