// libcuda (the driver API), loaded at run time: peer access per ordered pair of GPUs, matched to
// NVML's numbering by PCI bus id (the two orders need not agree), and the GPU list itself when
// NVML is missing.
#include "common/nvidia/cuda_driver_api.h"
#include "common/nvidia/dynamic_library.h"
#include "launcher/doctor/probe.h"

namespace hvrun::doctor {
namespace {

void add_reason(MachineDescription& m, const std::string& why) {
  if (m.driver.present) return;
  m.driver.why_absent += (m.driver.why_absent.empty() ? "" : ", ") + why;
}

}  // namespace

void probe_cuda_driver(MachineDescription& m) {
  nvidia::DynamicLibrary lib(nvidia::kCudaDriverLibrary);
  if (!lib) {
    add_reason(m, "libcuda.so.1 not found");
    return;
  }
  const nvidia::CudaDriverApi cuda = nvidia::CudaDriverApi::resolve(lib.handle());
  if (cuda.init == nullptr || cuda.device_count == nullptr || cuda.device_get == nullptr ||
      cuda.can_access_peer == nullptr) {
    add_reason(m, "libcuda.so.1 lacks cuInit/cuDeviceCanAccessPeer");
    return;
  }
  if (int rc = cuda.init(0); rc != 0) {
    add_reason(m, "cuInit failed (CUDA error " + std::to_string(rc) +
                      (rc == nvidia::kCuErrorNoDevice ? ": no CUDA-capable device" : "") + ")");
    return;
  }
  const bool nvml_listed = m.driver.present;
  m.driver.present = true;
  if (m.driver.cuda_driver_version == 0 && cuda.driver_version != nullptr)
    cuda.driver_version(&m.driver.cuda_driver_version);
  int n = 0;
  cuda.device_count(&n);
  // CUDA ordinal -> NVML index (by bus id); without NVML the ordinal is the index.
  std::vector<int> index_of(static_cast<size_t>(n), -1);
  std::vector<int> handles(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (cuda.device_get(&dev, i) != 0) continue;
    handles[static_cast<size_t>(i)] = dev;
    char text[96] = {};
    std::string bus;
    if (cuda.pci_bus_id != nullptr && cuda.pci_bus_id(text, sizeof text, dev) == 0) bus = text;
    if (nvml_listed) {
      for (const GpuInfo& g : m.gpus)
        if (!bus.empty() && normalise_bus_id(g.pci_bus_id) == normalise_bus_id(bus))
          index_of[static_cast<size_t>(i)] = g.index;
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.pci_bus_id = bus;
    if (cuda.device_name != nullptr && cuda.device_name(text, sizeof text, dev) == 0) g.name = text;
    size_t bytes = 0;
    if (cuda.total_memory != nullptr && cuda.total_memory(&bytes, dev) == 0) g.memory_total = static_cast<int64_t>(bytes);
    if (cuda.attribute != nullptr) {
      cuda.attribute(&g.cc_major, nvidia::kCuAttributeComputeCapabilityMajor, dev);
      cuda.attribute(&g.cc_minor, nvidia::kCuAttributeComputeCapabilityMinor, dev);
    }
    m.gpus.push_back(g);
    index_of[static_cast<size_t>(i)] = i;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int a = index_of[static_cast<size_t>(i)], b = index_of[static_cast<size_t>(j)];
      if (i == j || a < 0 || b < 0) continue;
      int ok = 0;
      if (cuda.can_access_peer(&ok, handles[static_cast<size_t>(i)], handles[static_cast<size_t>(j)]) != 0) continue;
      GpuPair* pair = nullptr;
      for (GpuPair& p : m.pairs)
        if (p.a == a && p.b == b) pair = &p;
      if (pair == nullptr) {
        m.pairs.push_back(GpuPair{});
        pair = &m.pairs.back();
        pair->a = a;
        pair->b = b;
      }
      pair->cuda_peer_access = ok != 0;
    }
  }
}

}  // namespace hvrun::doctor
