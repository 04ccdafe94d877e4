// What the launcher knows about this host's GPUs, asked of the NVIDIA driver at run time.
//
// The driver libraries (libnvidia-ml.so.1, libcuda.so.1) are dlopen()ed, never linked, so the
// same hvrun binary runs on machines without a driver: it then simply finds no GPU.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hvrun::launcher {

struct GpuInventory {
  // GPUs the job may use, in CUDA's numbering: the entries of a user-set CUDA_VISIBLE_DEVICES,
  // or "0".."count-1". Empty: no GPU (CPU job).
  std::vector<std::string> visible_devices;
  bool user_set_visible_devices = false;
  std::string source;  // how the count was found, for messages: "NVML", "libcuda", "none (...)"
};

// Counts GPUs: CUDA_VISIBLE_DEVICES when set (bounded by the driver's count when one answers),
// otherwise NVML, otherwise libcuda's cuDeviceGetCount.
GpuInventory probe_gpus(const std::function<const char*(const char*)>& getenv);

// Peer access between CUDA devices a and b (indices as CUDA numbers them in this process), asked
// through libcuda. nullopt when the driver cannot be asked; `why` then says why.
struct PeerAccessProbe {
  std::function<std::optional<bool>(int a, int b, std::string* why)> can_access_peer;
};
PeerAccessProbe driver_peer_access_probe();

}  // namespace hvrun::launcher
