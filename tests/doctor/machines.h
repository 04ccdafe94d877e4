// Scripted machine descriptions for the doctor's tests: a few lines build a GPU box, a
// GeForce workstation or a laptop without a driver.
#pragma once

#include <string>
#include <vector>

#include "launcher/doctor/machine.h"

namespace hvrun::doctor::test {

inline NetInterface iface(const std::string& name, const std::string& cidr, bool loopback = false) {
  NetInterface i;
  i.name = name;
  i.up = true;
  i.operstate = "up";
  i.mtu = 1500;
  i.loopback = loopback;
  if (!cidr.empty()) {
    i.addresses.push_back(cidr);
    if (cidr.find(':') == std::string::npos) i.has_ipv4 = true;
    else if (cidr.rfind("::1/", 0) != 0) i.has_routable_ipv6 = true;
  }
  return i;
}

inline GpuInfo gpu(int index, const std::string& name, int cc_major, int cc_minor) {
  GpuInfo g;
  g.index = index;
  g.name = name;
  g.uuid = "GPU-" + std::to_string(index);
  g.pci_bus_id = "00000000:" + std::to_string(10 + index) + ":00.0";
  g.memory_total = int64_t{80} << 30;
  g.memory_free = int64_t{79} << 30;
  g.cc_major = cc_major;
  g.cc_minor = cc_minor;
  g.utilization_gpu = 0;
  return g;
}

// Every ordered pair of the machine's GPUs with the given driver answers.
inline void connect_all(MachineDescription& m, bool peer_access, const std::string& nvml,
                        int ancestor, int nvlinks = 0) {
  for (const GpuInfo& a : m.gpus)
    for (const GpuInfo& b : m.gpus)
      if (a.index != b.index) {
        GpuPair p;
        p.a = a.index;
        p.b = b.index;
        p.cuda_peer_access = peer_access;
        p.nvml_p2p_read = nvml;
        p.common_ancestor = ancestor;
        p.nvlinks = nvlinks;
        m.pairs.push_back(p);
      }
}

// A healthy machine: driver 580.65.06 (CUDA 13.0), libcudart 13.0, NCCL 2.28.9, n GPUs of
// compute capability 9.0 on NVLink, eth0 and lo.
inline MachineDescription healthy(int gpus = 2, const std::string& name = "NVIDIA H100 80GB HBM3") {
  MachineDescription m;
  m.host = "gpu-box";
  m.driver.present = true;
  m.driver.version = "580.65.06";
  m.driver.cuda_driver_version = 13000;
  m.cuda_runtime = {true, "/usr/local/cuda/lib64/libcudart.so.13", "13.0", 13000, ""};
  m.nccl_runtime = {true, "/usr/lib/libnccl.so.2", "2.28.9", 22809, ""};
  for (int i = 0; i < gpus; ++i) m.gpus.push_back(gpu(i, name, 9, 0));
  connect_all(m, true, "OK", 10, 4);
  m.pcie.acs_enabled = false;
  m.pcie.iommu_enabled = false;
  m.pcie.virtual_machine = false;
  m.interfaces = {iface("lo", "127.0.0.1/8", true), iface("eth0", "10.0.0.5/24")};
  m.config_files = {{"/root/.nccl.conf", "~/.nccl.conf", false, true, {}},
                    {"/etc/nccl.conf", "/etc/nccl.conf", false, true, {}}};
  return m;
}

inline BuildFacts cuda_build() {
  return BuildFacts{true, "13.0", 22809, "2.28.9", 75};
}

inline BuildFacts cpu_build() { return BuildFacts{false, "none", 0, "none", 0}; }

}  // namespace hvrun::doctor::test
