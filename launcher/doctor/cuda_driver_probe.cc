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
  const auto init = cuda.init;
  const auto driver_version = cuda.driver_version;
  const auto count = cuda.device_count;
  const auto get = cuda.device_get;
  const auto bus_id = cuda.pci_bus_id;
  const auto name = cuda.device_name;
  const auto total_mem = cuda.total_memory;
  const auto attribute = cuda.attribute;
  const auto can_access = cuda.can_access_peer;
  if (init == nullptr || count == nullptr || get == nullptr || can_access == nullptr) {
    add_reason(m, "libcuda.so.1 lacks cuInit/cuDeviceCanAccessPeer");
    return;
  }
  if (int rc = init(0); rc != 0) {
    add_reason(m, "cuInit failed (CUDA error " + std::to_string(rc) +
                      (rc == nvidia::kCuErrorNoDevice ? ": no CUDA-capable device" : "") + ")");
    return;
  }
  const bool nvml_listed = m.driver.present;
  m.driver.present = true;
  if (m.driver.cuda_driver_version == 0 && driver_version != nullptr)
    driver_version(&m.driver.cuda_driver_version);
  int n = 0;
  count(&n);
  // CUDA ordinal -> NVML index (by bus id); without NVML the ordinal is the index.
  std::vector<int> index_of(static_cast<size_t>(n), -1);
  std::vector<int> handles(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (get(&dev, i) != 0) continue;
    handles[static_cast<size_t>(i)] = dev;
    char text[96] = {};
    std::string bus;
    if (bus_id != nullptr && bus_id(text, sizeof text, dev) == 0) bus = text;
    if (nvml_listed) {
      for (const GpuInfo& g : m.gpus)
        if (!bus.empty() && normalise_bus_id(g.pci_bus_id) == normalise_bus_id(bus))
          index_of[static_cast<size_t>(i)] = g.index;
      continue;
    }
    GpuInfo g;
    g.index = i;
    g.pci_bus_id = bus;
    if (name != nullptr && name(text, sizeof text, dev) == 0) g.name = text;
    size_t bytes = 0;
    if (total_mem != nullptr && total_mem(&bytes, dev) == 0) g.memory_total = static_cast<int64_t>(bytes);
    if (attribute != nullptr) {
      attribute(&g.cc_major, nvidia::kCuAttributeComputeCapabilityMajor, dev);
      attribute(&g.cc_minor, nvidia::kCuAttributeComputeCapabilityMinor, dev);
    }
    m.gpus.push_back(g);
    index_of[static_cast<size_t>(i)] = i;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int a = index_of[static_cast<size_t>(i)], b = index_of[static_cast<size_t>(j)];
      if (i == j || a < 0 || b < 0) continue;
      int ok = 0;
      if (can_access(&ok, handles[static_cast<size_t>(i)], handles[static_cast<size_t>(j)]) != 0) continue;
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
