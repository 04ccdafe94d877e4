// libcuda (the driver API), loaded at run time: peer access per ordered pair of GPUs, matched to
// NVML's numbering by PCI bus id (the two orders need not agree), and the GPU list itself when
// NVML is missing.
#include <dlfcn.h>

#include <memory>

#include "launcher/doctor/probe.h"

namespace hvrun::doctor {
namespace {

struct DlCloser {
  void operator()(void* h) const {
    if (h != nullptr) dlclose(h);
  }
};

template <typename Fn>
Fn sym(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

constexpr int kAttrCcMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

void add_reason(MachineDescription& m, const std::string& why) {
  if (m.driver.present) return;
  m.driver.why_absent += (m.driver.why_absent.empty() ? "" : ", ") + why;
}

}  // namespace

void probe_cuda_driver(MachineDescription& m) {
  std::unique_ptr<void, DlCloser> lib(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) {
    add_reason(m, "libcuda.so.1 not found");
    return;
  }
  void* h = lib.get();
  auto init = sym<int (*)(unsigned)>(h, "cuInit");
  auto driver_version = sym<int (*)(int*)>(h, "cuDriverGetVersion");
  auto count = sym<int (*)(int*)>(h, "cuDeviceGetCount");
  auto get = sym<int (*)(int*, int)>(h, "cuDeviceGet");
  auto bus_id = sym<int (*)(char*, int, int)>(h, "cuDeviceGetPCIBusId");
  auto name = sym<int (*)(char*, int, int)>(h, "cuDeviceGetName");
  auto total_mem = sym<int (*)(size_t*, int)>(h, "cuDeviceTotalMem_v2");
  auto attribute = sym<int (*)(int*, int, int)>(h, "cuDeviceGetAttribute");
  auto can_access = sym<int (*)(int*, int, int)>(h, "cuDeviceCanAccessPeer");
  if (init == nullptr || count == nullptr || get == nullptr || can_access == nullptr) {
    add_reason(m, "libcuda.so.1 lacks cuInit/cuDeviceCanAccessPeer");
    return;
  }
  if (int rc = init(0); rc != 0) {
    add_reason(m, "cuInit failed (CUDA error " + std::to_string(rc) +
                      (rc == 100 ? ": no CUDA-capable device" : "") + ")");
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
      attribute(&g.cc_major, kAttrCcMajor, dev);
      attribute(&g.cc_minor, kAttrCcMinor, dev);
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
