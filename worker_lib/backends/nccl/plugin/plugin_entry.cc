// libhvrun_cuda.so's entry points, looked up by backends/nccl/plugin_loader.cc with dlsym.
#include "worker_lib/backends/nccl/device_plane.h"
#include "worker_lib/backends/nccl/plugin/cuda_device_plane.h"

extern "C" {

__attribute__((visibility("default"))) int hvrun_cuda_plugin_abi_version() {
  return hvrun::detail::cuda::kPluginAbiVersion;
}

__attribute__((visibility("default"))) hvrun::detail::cuda::DevicePlane* hvrun_cuda_plugin_create(
    const hvrun::detail::cuda::PluginContext* context) {
  return new hvrun::detail::cuda::CudaDevicePlane(*context);
}
}
