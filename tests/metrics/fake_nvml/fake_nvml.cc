// STAND-IN for libnvidia-ml.so.1 (NOT NVIDIA's library): three scripted "GPUs" so that
// worker_lib/telemetry/gpu_sampler.cc's loading, CUDA_VISIBLE_DEVICES mapping and -1 handling run
// on machines without a driver. Only metrics_gpu_sampler_test loads it, by path.
//   GPU 0: every query works.  GPU 1: utilization and temperature fail (NOT_SUPPORTED).
//   GPU 2: power fails.
#include <cstdio>
#include <cstring>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr unsigned kCount = 3;

struct FakeGpu {
  const char* name;
  const char* uuid;
  const char* bus_id;
  unsigned utilization;
  unsigned long long total, used;
  unsigned temperature, milliwatts;
};
FakeGpu gpus[kCount] = {
    {"Fake GPU A", "GPU-aaaaaaaa-0000-0000-0000-000000000000", "00000000:18:00.0", 55, 80ULL << 30,
     10ULL << 30, 40, 300500},
    {"Fake GPU B", "GPU-bbbbbbbb-0000-0000-0000-000000000000", "00000000:2A:00.0", 0, 80ULL << 30,
     20ULL << 30, 0, 250000},
    {"Fake GPU C", "GPU-abcd0000-0000-0000-0000-000000000000", "00000000:3B:00.0", 99, 40ULL << 30,
     30ULL << 30, 70, 0},
};

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned gpu, memory;
};

FakeGpu* gpu_of(void* device) {
  for (auto& g : gpus)
    if (device == &g) return &g;
  return nullptr;
}

}  // namespace

extern "C" {

int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kCount;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= kCount) return kInvalidArgument;
  *device = &gpus[index];
  return kSuccess;
}
int nvmlDeviceGetName(void* device, char* name, unsigned length) {
  std::snprintf(name, length, "%s", gpu_of(device)->name);
  return kSuccess;
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  std::snprintf(uuid, length, "%s", gpu_of(device)->uuid);
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->bus_id, sizeof pci->bus_id, "%s", gpu_of(device)->bus_id);
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void* device, Utilization* u) {
  if (gpu_of(device) == &gpus[1]) return kNotSupported;
  u->gpu = gpu_of(device)->utilization;
  u->memory = 0;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* m) {
  m->total = gpu_of(device)->total;
  m->used = gpu_of(device)->used;
  m->free = m->total - m->used;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void* device, int sensor, unsigned* celsius) {
  if (sensor != 0 || gpu_of(device) == &gpus[1]) return kNotSupported;
  *celsius = gpu_of(device)->temperature;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* device, unsigned* milliwatts) {
  if (gpu_of(device) == &gpus[2]) return kNotSupported;
  *milliwatts = gpu_of(device)->milliwatts;
  return kSuccess;
}

}  // extern "C"
