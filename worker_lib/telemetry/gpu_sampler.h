// GPU samples for a worker's telemetry reports: utilization, memory, temperature and
// power of the GPUs this process can see, read through NVML. libnvidia-ml.so.1 is dlopen()ed
// (never linked: libhvrun.so runs on machines without a driver); absent, the sample is empty.
//
// Which GPUs, numbered how: the GPUs CUDA_VISIBLE_DEVICES leaves visible, each with its CUDA
// ordinal as this process sees it (GpuSample.index), in CUDA's order:
//  * unset: every GPU NVML enumerates, index = NVML index. NVML numbers GPUs in PCI bus order,
//    which is CUDA's order with CUDA_DEVICE_ORDER=PCI_BUS_ID, and in practice with identical
//    GPUs; with mixed models CUDA's default (fastest first) may number them differently, so
//    pci_bus_id is the identity to rely on.
//  * a list: entry k (an NVML index, a "GPU-<uuid>" or a unique prefix of one) is CUDA ordinal
//    k. Like CUDA, the list ends at the first entry that names no GPU. MIG instances ("MIG-...")
//    cannot be mapped to NVML's whole-GPU handles here and are left out.
//  * empty: no GPU.
// With --gpu-pinning local-rank every rank of a host sees (and reports) every GPU of the host;
// dashboards aggregate per (host, pci_bus_id).
//
// Values NVML cannot read for a GPU (not supported, no permission) are -1.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hvrun.pb.h"

namespace hvrun::detail::telemetry {

// The process's GPUs now. The library is loaded and initialised on the first call, once per
// process (a failed load is not retried); later calls cost a few NVML queries per GPU (well
// under a millisecond). `cuda_visible_devices`: CUDA_VISIBLE_DEVICES as the worker's Config
// read it (hvrun::TelemetryConfig), nullopt when unset. Thread-safe.
std::vector<v1::GpuSample> sample_gpus(const std::optional<std::string>& cuda_visible_devices);

// NVML loaded from a given path: sample_gpus() uses one for "libnvidia-ml.so.1"; tests load a
// stand-in library.
class NvmlSampler {
 public:
  explicit NvmlSampler(const std::string& library);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  bool loaded() const { return api_ != nullptr; }
  // Why nothing can be sampled ("libnvidia-ml.so.1 not found", "nvmlInit_v2 failed ...").
  const std::string& why_not_loaded() const { return why_not_; }

  // `cuda_visible_devices`: CUDA_VISIBLE_DEVICES's value, or nullptr when it is unset.
  std::vector<v1::GpuSample> sample(const char* cuda_visible_devices) const;

  struct Api;

 private:
  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string why_not_;
};

}  // namespace hvrun::detail::telemetry
