// Finds and loads the GPU data plane plugin (libhvrun_cuda.so) on the first CUDA tensor.
//
// Looked for, in order: next to libhvrun.so (where the build and the bundle put it), then by
// name through the dynamic loader (LD_LIBRARY_PATH, RUNPATH). The plugin needs libnccl.so.2,
// found the same way; a missing one is reported with where to get it (PyTorch's
// nvidia/nccl/lib). The library stays loaded for the life of the process (CUDA and NCCL do not
// support unloading).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker_lib/backends/nccl/device_plane.h"

namespace hvrun::detail::cuda {

// Where load_device_plane() looks by default.
std::vector<std::string> default_plugin_candidates();

// Loads the first candidate that opens, checks its ABI version and creates the plane. Failures
// name every candidate tried and the loader's reason.
Result<std::unique_ptr<DevicePlane>> load_device_plane(const PluginContext& context,
                                                       const std::vector<std::string>& candidates);

}  // namespace hvrun::detail::cuda
