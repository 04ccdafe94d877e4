// NVML, loaded at run time (common/nvidia/nvml_api.h): a missing library means "no driver".
#include <cstring>
#include <fstream>

#include "common/nvidia/dynamic_library.h"
#include "common/nvidia/nvml_api.h"
#include "launcher/doctor/probe.h"

namespace hvrun::doctor {
namespace {

using Device = nvidia::NvmlDevice;
using nvidia::kNvmlFeatureEnabled;
using nvidia::kNvmlNvlinkMaxLinks;

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
  nvidia::DynamicLibrary lib(nvidia::kNvmlLibrary);
  if (!lib) {
    m.driver.why_absent = "libnvidia-ml.so.1 not found";
    probe_cuda_driver(m);
    return;
  }
  const nvidia::NvmlApi nvml = nvidia::NvmlApi::resolve(lib.handle());
  const auto cuda_version =
      nvml.cuda_driver_version_v2 != nullptr ? nvml.cuda_driver_version_v2 : nvml.cuda_driver_version;
  if (nvml.init == nullptr || nvml.count == nullptr || nvml.by_index == nullptr ||
      nvml.shutdown == nullptr) {
    m.driver.why_absent = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
    probe_cuda_driver(m);
    return;
  }
  if (int rc = nvml.init(); rc != 0) {
    m.driver.why_absent = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) +
                          "; is the kernel module loaded?)";
    probe_cuda_driver(m);
    return;
  }
  m.driver.present = true;
  char text[96] = {};
  if (nvml.driver_version != nullptr && nvml.driver_version(text, sizeof text) == 0) m.driver.version = text;
  if (cuda_version != nullptr) cuda_version(&m.driver.cuda_driver_version);
  unsigned n = 0;
  nvml.count(&n);
  std::vector<Device> devices;
  for (unsigned i = 0; i < n; ++i) {
    Device d = nullptr;
    if (nvml.by_index(i, &d) != 0) continue;
    devices.push_back(d);
    GpuInfo g;
    g.index = static_cast<int>(i);
    if (nvml.name != nullptr && nvml.name(d, text, sizeof text) == 0) g.name = text;
    if (nvml.uuid != nullptr && nvml.uuid(d, text, sizeof text) == 0) g.uuid = text;
    nvidia::NvmlPciInfo info{};
    if (nvml.pci_info_v3 != nullptr && nvml.pci_info_v3(d, &info) == 0) g.pci_bus_id = info.bus_id;
    nvidia::NvmlMemory mem{};
    if (nvml.memory != nullptr && nvml.memory(d, &mem) == 0) {
      g.memory_total = static_cast<int64_t>(mem.total);
      g.memory_free = static_cast<int64_t>(mem.free);
    }
    if (nvml.compute_capability != nullptr) nvml.compute_capability(d, &g.cc_major, &g.cc_minor);
    nvidia::NvmlUtilization u{};
    if (nvml.utilization != nullptr && nvml.utilization(d, &u) == 0) {
      g.utilization_gpu = static_cast<int>(u.gpu);
      g.utilization_memory = static_cast<int>(u.memory);
    }
    if (!g.pci_bus_id.empty()) g.numa_node = read_numa_node(g.pci_bus_id);
    if (nvml.nvlink_state != nullptr) {
      g.active_nvlinks = 0;
      for (unsigned link = 0; link < kNvmlNvlinkMaxLinks; ++link) {
        int state = 0;
        if (nvml.nvlink_state(d, link, &state) == 0 && state == kNvmlFeatureEnabled) ++g.active_nvlinks;
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
      if (nvml.common_ancestor != nullptr && nvml.common_ancestor(devices[a], devices[b], &level) == 0) pair.common_ancestor = level;
      if (nvml.p2p_status != nullptr && nvml.p2p_status(devices[a], devices[b], nvidia::kNvmlP2pCapsRead, &status) == 0)
        pair.nvml_p2p_read = p2p_status_name(status);
      // Links of a whose far end is b (an NVSwitch in between shows as no direct link).
      if (nvml.nvlink_state != nullptr && nvml.nvlink_remote_pci_info_v2 != nullptr) {
        for (unsigned link = 0; link < kNvmlNvlinkMaxLinks; ++link) {
          int state = 0;
          nvidia::NvmlPciInfo remote{};
          if (nvml.nvlink_state(devices[a], link, &state) != 0 || state != kNvmlFeatureEnabled) continue;
          if (nvml.nvlink_remote_pci_info_v2(devices[a], link, &remote) == 0 &&
              normalise_bus_id(remote.bus_id) == normalise_bus_id(m.gpus[b].pci_bus_id))
            ++pair.nvlinks;
        }
      }
      m.pairs.push_back(pair);
    }
  }
  nvml.shutdown();
  probe_cuda_driver(m);
}

}  // namespace hvrun::doctor
