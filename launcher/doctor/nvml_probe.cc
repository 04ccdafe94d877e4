// NVML, loaded at run time (the pattern of NCCL's src/misc/nvmlwrap.cc): a missing library means
// "no driver". Only the few types hvrun reads are declared, with nvml.h's layouts.
#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <memory>

#include "launcher/doctor/probe.h"

namespace hvrun::doctor {
namespace {

using Device = void*;  // nvmlDevice_t is an opaque pointer

struct PciInfoV3 {  // nvmlPciInfo_t (v3): 68 bytes
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
static_assert(sizeof(PciInfoV3) == 68, "nvmlPciInfo_t layout");

struct Memory {  // nvmlMemory_t (v1)
  unsigned long long total, free, used;
};
struct Utilization {  // nvmlUtilization_t
  unsigned gpu, memory;
};

constexpr int kNvlinkMaxLinks = 18;      // NVML_NVLINK_MAX_LINKS
constexpr int kP2pCapsRead = 0;          // NVML_P2P_CAPS_INDEX_READ
constexpr int kFeatureEnabled = 1;       // NVML_FEATURE_ENABLED

std::string p2p_status_name(int s) {
  switch (s) {
    case 0: return "OK";
    case 1: return "chipset not supported";
    case 2: return "GPU not supported";
    case 3: return "IOH topology not supported";
    case 4: return "disabled by regkey";
    case 5: return "not supported";
    default: return "unknown";
  }
}

struct DlCloser {
  void operator()(void* h) const {
    if (h != nullptr) dlclose(h);
  }
};

template <typename Fn>
Fn sym(void* lib, const char* name) {
  return reinterpret_cast<Fn>(dlsym(lib, name));
}

int read_numa_node(const std::string& bus_id) {
  std::ifstream in("/sys/bus/pci/devices/" + normalise_bus_id(bus_id) + "/numa_node");
  int node = -1;
  if (in >> node) return node;
  return -1;
}

}  // namespace

std::string normalise_bus_id(const std::string& bus_id) {
  std::string id = bus_id;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Domain is 8 hex digits in NVML, 4 in sysfs and CUDA: keep the last "dddd:bb:dd.f".
  if (id.size() > 12) id = id.substr(id.size() - 12);
  return id;
}

void probe_nvidia_driver(MachineDescription& m) {
  std::unique_ptr<void, DlCloser> lib(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) {
    m.driver.why_absent = "libnvidia-ml.so.1 not found";
    probe_cuda_driver(m);
    return;
  }
  void* h = lib.get();
  auto init = sym<int (*)()>(h, "nvmlInit_v2");
  auto shutdown = sym<int (*)()>(h, "nvmlShutdown");
  auto driver_version = sym<int (*)(char*, unsigned)>(h, "nvmlSystemGetDriverVersion");
  auto cuda_version = sym<int (*)(int*)>(h, "nvmlSystemGetCudaDriverVersion_v2");
  if (cuda_version == nullptr) cuda_version = sym<int (*)(int*)>(h, "nvmlSystemGetCudaDriverVersion");
  auto count = sym<int (*)(unsigned*)>(h, "nvmlDeviceGetCount_v2");
  auto by_index = sym<int (*)(unsigned, Device*)>(h, "nvmlDeviceGetHandleByIndex_v2");
  auto name = sym<int (*)(Device, char*, unsigned)>(h, "nvmlDeviceGetName");
  auto uuid = sym<int (*)(Device, char*, unsigned)>(h, "nvmlDeviceGetUUID");
  auto pci = sym<int (*)(Device, PciInfoV3*)>(h, "nvmlDeviceGetPciInfo_v3");
  auto memory = sym<int (*)(Device, Memory*)>(h, "nvmlDeviceGetMemoryInfo");
  auto cc = sym<int (*)(Device, int*, int*)>(h, "nvmlDeviceGetCudaComputeCapability");
  auto util = sym<int (*)(Device, Utilization*)>(h, "nvmlDeviceGetUtilizationRates");
  auto ancestor = sym<int (*)(Device, Device, int*)>(h, "nvmlDeviceGetTopologyCommonAncestor");
  auto p2p = sym<int (*)(Device, Device, int, int*)>(h, "nvmlDeviceGetP2PStatus");
  auto link_state = sym<int (*)(Device, unsigned, int*)>(h, "nvmlDeviceGetNvLinkState");
  auto link_remote = sym<int (*)(Device, unsigned, PciInfoV3*)>(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (init == nullptr || count == nullptr || by_index == nullptr || shutdown == nullptr) {
    m.driver.why_absent = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
    probe_cuda_driver(m);
    return;
  }
  if (int rc = init(); rc != 0) {
    m.driver.why_absent = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) +
                          "; is the kernel module loaded?)";
    probe_cuda_driver(m);
    return;
  }
  m.driver.present = true;
  char text[96] = {};
  if (driver_version != nullptr && driver_version(text, sizeof text) == 0) m.driver.version = text;
  if (cuda_version != nullptr) cuda_version(&m.driver.cuda_driver_version);
  unsigned n = 0;
  count(&n);
  std::vector<Device> devices;
  for (unsigned i = 0; i < n; ++i) {
    Device d = nullptr;
    if (by_index(i, &d) != 0) continue;
    devices.push_back(d);
    GpuInfo g;
    g.index = static_cast<int>(i);
    if (name != nullptr && name(d, text, sizeof text) == 0) g.name = text;
    if (uuid != nullptr && uuid(d, text, sizeof text) == 0) g.uuid = text;
    PciInfoV3 info{};
    if (pci != nullptr && pci(d, &info) == 0) g.pci_bus_id = info.bus_id;
    Memory mem{};
    if (memory != nullptr && memory(d, &mem) == 0) {
      g.memory_total = static_cast<int64_t>(mem.total);
      g.memory_free = static_cast<int64_t>(mem.free);
    }
    if (cc != nullptr) cc(d, &g.cc_major, &g.cc_minor);
    Utilization u{};
    if (util != nullptr && util(d, &u) == 0) {
      g.utilization_gpu = static_cast<int>(u.gpu);
      g.utilization_memory = static_cast<int>(u.memory);
    }
    if (!g.pci_bus_id.empty()) g.numa_node = read_numa_node(g.pci_bus_id);
    if (link_state != nullptr) {
      g.active_nvlinks = 0;
      for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
        int state = 0;
        if (link_state(d, link, &state) == 0 && state == kFeatureEnabled) ++g.active_nvlinks;
      }
    }
    m.gpus.push_back(g);
  }
  for (size_t a = 0; a < devices.size(); ++a) {
    for (size_t b = 0; b < devices.size(); ++b) {
      if (a == b) continue;
      GpuPair pair;
      pair.a = m.gpus[a].index;
      pair.b = m.gpus[b].index;
      int level = -1, status = -1;
      if (ancestor != nullptr && ancestor(devices[a], devices[b], &level) == 0) pair.common_ancestor = level;
      if (p2p != nullptr && p2p(devices[a], devices[b], kP2pCapsRead, &status) == 0)
        pair.nvml_p2p_read = p2p_status_name(status);
      // Links of a whose far end is b (an NVSwitch in between shows as no direct link).
      if (link_state != nullptr && link_remote != nullptr) {
        for (unsigned link = 0; link < kNvlinkMaxLinks; ++link) {
          int state = 0;
          PciInfoV3 remote{};
          if (link_state(devices[a], link, &state) != 0 || state != kFeatureEnabled) continue;
          if (link_remote(devices[a], link, &remote) == 0 &&
              normalise_bus_id(remote.bus_id) == normalise_bus_id(m.gpus[b].pci_bus_id))
            ++pair.nvlinks;
        }
      }
      m.pairs.push_back(pair);
    }
  }
  shutdown();
  probe_cuda_driver(m);
}

}  // namespace hvrun::doctor
