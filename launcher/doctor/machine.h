// What `hvrun doctor` knows about a machine: everything the verdicts look at, as plain data.
//
// The real probe (host_probe.h) fills it from the driver, sysfs and the environment; tests write
// it by hand (scripted GPUs, topologies, interfaces, NCCL settings), so every verdict is tested
// without a GPU. Unknown values stay at their "unknown" defaults (-1, nullopt, empty).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvrun::doctor {

// A library found (or not) at run time, e.g. libnccl.so.2 or libcudart.so.13.
struct LibraryFound {
  bool found = false;
  std::string path;     // where the loader found it, when known
  std::string version;  // "2.28.9", "13.0"
  int code = 0;         // NCCL_VERSION_CODE-style (22809) or CUDA-style (13000)
  std::string note;     // why not found, or a hint ("present in /usr/local/cuda/lib64 but ...")
  // NCCL: the functions hvrun's GPU data plane calls that this library does not export.
  std::vector<std::string> missing;
};

struct DriverInfo {
  bool present = false;
  std::string why_absent;       // "libnvidia-ml.so.1 not found, libcuda.so.1 not found"
  std::string version;          // "580.65.06"
  int cuda_driver_version = 0;  // 13000 = the newest CUDA this driver runs
};

struct GpuInfo {
  int index = 0;             // NVML index
  std::string name;          // "NVIDIA H200"
  std::string uuid;          // "GPU-..."
  std::string pci_bus_id;    // "00000000:18:00.0"
  int64_t memory_total = -1;  // bytes
  int64_t memory_free = -1;
  int cc_major = -1;
  int cc_minor = -1;
  int numa_node = -1;
  int utilization_gpu = -1;     // percent
  int utilization_memory = -1;  // percent
  int active_nvlinks = -1;      // links in state active
};

// One ordered pair of GPUs (NVML indices).
struct GpuPair {
  int a = 0;
  int b = 0;
  std::optional<bool> cuda_peer_access;  // cuDeviceCanAccessPeer
  std::string nvml_p2p_read;             // "OK", "chipset not supported", ... ("" unknown)
  int common_ancestor = -1;              // NVML topology level: 0,10,20,30,40,50; -1 unknown
  int nvlinks = 0;                       // NVLink links joining a and b (both directions)
};

struct NetInterface {
  std::string name;
  std::vector<std::string> addresses;  // "192.168.1.4/24", "fe80::1/64"
  bool has_ipv4 = false;
  bool has_routable_ipv6 = false;      // an IPv6 address other than loopback
  bool up = false;                     // IFF_UP
  std::string operstate;               // /sys/class/net/X/operstate: "up", "down", "unknown"
  int speed_mbps = -1;                 // /sys/class/net/X/speed; -1 unknown (virtual)
  int mtu = -1;
  bool loopback = false;
  bool bridge = false;                 // /sys/class/net/X/bridge exists
  bool is_virtual = false;             // no /sys/class/net/X/device (veth, tun, docker, ...)
};

// One NCCL configuration file and the NAME=VALUE lines it holds.
struct NcclConfigFile {
  std::string path;
  std::string role;  // "NCCL_CONF_FILE", "~/.nccl.conf", "/etc/nccl.conf"
  bool exists = false;
  bool read_by_nccl = true;  // ~/.nccl.conf is skipped when NCCL_CONF_FILE is set
  std::vector<std::pair<std::string, std::string>> entries;
};

// Facts about the PCIe fabric that make a driver's "P2P OK" unreliable.
struct PcieFacts {
  std::optional<bool> acs_enabled;  // ACS source validation / P2P redirect on a bridge
  std::string acs_where;            // "0000:00:01.0" (first bridge found with it on)
  std::optional<bool> iommu_enabled;
  std::optional<bool> virtual_machine;
  std::string hypervisor;           // "KVM", ... when known
};

// A deep-learning framework found in the Python the user runs (`hvrun doctor --frameworks`):
// its own CUDA is what the driver must serve, whatever the system's libcudart is.
struct FrameworkInfo {
  std::string name;     // "PyTorch", "TensorFlow"
  std::string version;  // "2.11.0"
  std::string cuda;     // "12.8"; "" for a CPU-only build
  std::string cudnn;
  std::string nccl;     // "2.28.9" when the framework reports one
};

struct MachineDescription {
  std::string host;
  DriverInfo driver;
  LibraryFound cuda_runtime;  // libcudart found at run time
  LibraryFound nccl_runtime;  // libnccl.so.2 found at run time
  std::vector<GpuInfo> gpus;
  std::vector<GpuPair> pairs;  // a != b
  PcieFacts pcie;
  std::vector<NetInterface> interfaces;
  std::map<std::string, std::string> environment;  // NCCL_*, CUDA_VISIBLE_DEVICES, HVRUN_NCCL_P2P
  std::vector<NcclConfigFile> config_files;
  std::vector<FrameworkInfo> frameworks;  // only with --frameworks
  std::string frameworks_note;            // which python was asked, or why it could not be
};

// What this build of hvrun was compiled with (from common/build_info.h).
struct BuildFacts {
  bool have_cuda = false;
  std::string cuda_version;  // "13.0"; "none"
  int nccl_version_code = 0;  // 22809; 0 without NCCL
  std::string nccl_version;
  int min_compute_capability = 0;  // 75 for a CUDA 13 build; 0 unknown / CPU build
};

BuildFacts this_build();

}  // namespace hvrun::doctor
