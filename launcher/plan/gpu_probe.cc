#include "launcher/plan/gpu_probe.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "common/nvidia/cuda_driver_api.h"
#include "common/nvidia/dynamic_library.h"
#include "common/nvidia/nvml_api.h"

namespace hvrun::launcher {
namespace {

using nvidia::CudaDriverApi;
using nvidia::DynamicLibrary;
using nvidia::NvmlApi;

DynamicLibrary open_driver_library(const char* name, std::string* why) {
  DynamicLibrary lib(name);
  // dlerror() repeats the name and adds little; "no driver" is what the user needs to know.
  if (!lib) *why = std::string(name) + " not found";
  return lib;
}

std::optional<int> nvml_count(std::string* why) {
  DynamicLibrary lib = open_driver_library(nvidia::kNvmlLibrary, why);
  if (!lib) return std::nullopt;
  const NvmlApi nvml = NvmlApi::resolve(lib.handle());
  if (nvml.init == nullptr || nvml.count == nullptr || nvml.shutdown == nullptr) {
    *why = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
    return std::nullopt;
  }
  if (int rc = nvml.init(); rc != 0) {
    *why = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) + ")";
    return std::nullopt;
  }
  unsigned int n = 0;
  int rc = nvml.count(&n);
  nvml.shutdown();
  if (rc != 0) {
    *why = "nvmlDeviceGetCount_v2 failed (NVML error " + std::to_string(rc) + ")";
    return std::nullopt;
  }
  return static_cast<int>(n);
}

std::optional<int> cuda_count(std::string* why) {
  DynamicLibrary lib = open_driver_library(nvidia::kCudaDriverLibrary, why);
  if (!lib) return std::nullopt;
  const CudaDriverApi cuda = CudaDriverApi::resolve(lib.handle());
  if (cuda.init == nullptr || cuda.device_count == nullptr) {
    *why = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
    return std::nullopt;
  }
  if (int rc = cuda.init(0); rc != 0) {
    *why = "cuInit failed (CUDA error " + std::to_string(rc) + ")";
    return std::nullopt;
  }
  int n = 0;
  if (int rc = cuda.device_count(&n); rc != 0) {
    *why = "cuDeviceGetCount failed (CUDA error " + std::to_string(rc) + ")";
    return std::nullopt;
  }
  return n;
}

std::vector<std::string> split_visible_devices(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    // CUDA stops at the first invalid entry; -1 is the documented way to hide the rest.
    if (item.empty() || item == "-1") break;
    out.push_back(item);
  }
  return out;
}

}  // namespace

GpuInventory probe_gpus(const std::function<const char*(const char*)>& getenv) {
  GpuInventory inv;
  std::string nvml_why, cuda_why;
  std::optional<int> driver_count = nvml_count(&nvml_why);
  std::string driver_source = "NVML";
  if (!driver_count) {
    driver_count = cuda_count(&cuda_why);
    driver_source = "libcuda";
  }
  if (const char* cvd = getenv("CUDA_VISIBLE_DEVICES"); cvd != nullptr) {
    inv.user_set_visible_devices = true;
    inv.visible_devices = split_visible_devices(cvd);
    if (driver_count && static_cast<int>(inv.visible_devices.size()) > *driver_count)
      inv.visible_devices.resize(static_cast<size_t>(*driver_count));
    inv.source = "CUDA_VISIBLE_DEVICES='" + std::string(cvd) + "'";
    return inv;
  }
  if (!driver_count) {
    inv.source = "no NVIDIA driver: " + nvml_why + ", " + cuda_why;
    return inv;
  }
  for (int i = 0; i < *driver_count; ++i) inv.visible_devices.push_back(std::to_string(i));
  inv.source = driver_source;
  return inv;
}

PeerAccessProbe driver_peer_access_probe() {
  // The library stays loaded for the probe's lifetime: cuInit is process-wide anyway.
  auto lib = std::make_shared<DynamicLibrary>();
  auto load_error = std::make_shared<std::string>();
  return PeerAccessProbe{[lib, load_error](int a, int b, std::string* why) -> std::optional<bool> {
    if (!*lib) {
      *lib = open_driver_library(nvidia::kCudaDriverLibrary, load_error.get());
      if (!*lib) {
        *why = *load_error;
        return std::nullopt;
      }
    }
    const CudaDriverApi cuda = CudaDriverApi::resolve(lib->handle());
    if (cuda.init == nullptr || cuda.device_get == nullptr || cuda.can_access_peer == nullptr) {
      *why = "libcuda.so.1 lacks cuDeviceCanAccessPeer";
      return std::nullopt;
    }
    int dev_a = 0, dev_b = 0, ok = 0;
    if (cuda.init(0) != 0 || cuda.device_get(&dev_a, a) != 0 || cuda.device_get(&dev_b, b) != 0 ||
        cuda.can_access_peer(&ok, dev_a, dev_b) != 0) {
      *why = "cuDeviceCanAccessPeer(" + std::to_string(a) + ", " + std::to_string(b) + ") failed";
      return std::nullopt;
    }
    return ok != 0;
  }};
}

}  // namespace hvrun::launcher
