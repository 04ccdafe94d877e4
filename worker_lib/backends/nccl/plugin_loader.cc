#include "worker_lib/backends/nccl/plugin_loader.h"

#include <dlfcn.h>

#include "common/build_info.h"
#include "common/logging.h"
#include "worker_lib/backends/nccl/nccl_errors.h"
#include "worker_lib/library_location.h"

namespace hvrun::detail::cuda {

std::vector<std::string> default_plugin_candidates() {
  std::vector<std::string> candidates;
  if (std::string dir = library_directory(); !dir.empty()) {
    candidates.push_back(dir + "/" + kPluginFileName);
    candidates.push_back(dir + "/../lib/" + kPluginFileName);  // a program in bin/ beside lib/
  }
  candidates.emplace_back(kPluginFileName);  // LD_LIBRARY_PATH, RUNPATH, system paths
  return candidates;
}

Result<std::unique_ptr<DevicePlane>> load_device_plane(const PluginContext& context,
                                                       const std::vector<std::string>& candidates) {
  std::vector<PluginAttempt> attempts;
  for (const std::string& path : candidates) {
    dlerror();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      attempts.push_back({path, why ? why : "not found"});
      continue;
    }
    auto abi = reinterpret_cast<hvrun_cuda_plugin_abi_version_fn>(dlsym(handle, kPluginAbiSymbol));
    auto create = reinterpret_cast<hvrun_cuda_plugin_create_fn>(dlsym(handle, kPluginCreateSymbol));
    if (abi == nullptr || create == nullptr) {
      attempts.push_back({path, "not an hvrun CUDA plugin (missing entry points)"});
      dlclose(handle);
      continue;
    }
    if (abi() != kPluginAbiVersion) {
      attempts.push_back({path, "plugin ABI version " + std::to_string(abi()) + ", libhvrun " +
                                    std::to_string(kPluginAbiVersion) +
                                    " (libhvrun_cuda.so from another hvrun build)"});
      dlclose(handle);
      continue;
    }
    std::unique_ptr<DevicePlane> plane(create(&context));
    if (!plane) return internal_error("libhvrun_cuda.so at " + path + " could not create its data plane");
    SPDLOG_DEBUG("loaded the GPU data plane from {} (NCCL {})", path, plane->nccl_version());
    return plane;  // the library stays loaded: never dlclose'd
  }
  return plugin_missing_status(attempts, build_info().have_cuda);
}

}  // namespace hvrun::detail::cuda
