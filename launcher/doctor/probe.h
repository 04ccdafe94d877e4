// Where the doctor's facts come from. The command asks a MachineProbe; the real one
// (host_probe) reads this host, tests pass scripted descriptions.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/doctor/machine.h"

namespace hvrun::doctor {

class MachineProbe {
 public:
  virtual ~MachineProbe() = default;
  virtual MachineDescription describe() = 0;
};

// A probe that returns a fixed description (tests, recorded machines).
class ScriptedProbe : public MachineProbe {
 public:
  explicit ScriptedProbe(MachineDescription m) : machine_(std::move(m)) {}
  MachineDescription describe() override { return machine_; }

 private:
  MachineDescription machine_;
};

// This host: NVML and libcuda through dlopen (absent = no driver), libcudart and libnccl.so.2
// through dlopen, network interfaces from getifaddrs and /sys/class/net, PCIe facts from sysfs,
// NCCL settings from `getenv` and NCCL's configuration files.
std::unique_ptr<MachineProbe> host_probe(std::function<const char*(const char*)> getenv);

// The pieces host_probe combines (each fills its part; failures leave "unknown").
void probe_nvidia_driver(MachineDescription& m);   // nvml_probe.cc + cuda_driver_probe.cc
void probe_cuda_driver(MachineDescription& m);     // cuda_driver_probe.cc
void probe_libraries(MachineDescription& m);       // library_probe.cc
void probe_network(MachineDescription& m);         // network_probe.cc
void probe_pcie(MachineDescription& m);            // pcie_probe.cc

// A bridge's PCI configuration space (sysfs `config`): whether its ACS control register
// redirects peer-to-peer requests or completions; nullopt when the extended space (offset 0x100
// on, readable by root only) is missing.
std::optional<bool> acs_redirects_p2p(const std::string& config);

// "00000000:18:00.0" or "0000:18:00.0" -> "0000:18:00.0" (sysfs form, lower case).
std::string normalise_bus_id(const std::string& bus_id);

}  // namespace hvrun::doctor
