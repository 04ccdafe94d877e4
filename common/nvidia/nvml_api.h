// NVML (libnvidia-ml.so.1) as hvrun uses it: the few types it reads, declared with nvml.h's
// layouts (the header is not needed to build), and the entry points, looked up by name (the
// pattern of NCCL's src/misc/nvmlwrap.cc). Results are ints, 0 = NVML_SUCCESS; enums are ints.
#pragma once

namespace hvrun::nvidia {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

using NvmlDevice = void*;  // nvmlDevice_t is an opaque pointer

struct NvmlPciInfo {  // nvmlPciInfo_t (v2 and v3 share it): 68 bytes
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
static_assert(sizeof(NvmlPciInfo) == 68, "nvmlPciInfo_t layout");

struct NvmlMemory {  // nvmlMemory_t (v1)
  unsigned long long total, free, used;
};

struct NvmlUtilization {  // nvmlUtilization_t
  unsigned gpu, memory;
};

inline constexpr int kNvmlSuccess = 0;          // NVML_SUCCESS
inline constexpr int kNvmlTemperatureGpu = 0;   // NVML_TEMPERATURE_GPU
inline constexpr int kNvmlNvlinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
inline constexpr int kNvmlP2pCapsRead = 0;      // NVML_P2P_CAPS_INDEX_READ
inline constexpr int kNvmlFeatureEnabled = 1;   // NVML_FEATURE_ENABLED
inline constexpr int kNvmlErrorNotSupported = 3;         // NVML_ERROR_NOT_SUPPORTED
inline constexpr int kNvmlMemoryErrorUncorrected = 1;    // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
inline constexpr int kNvmlVolatileEcc = 0;               // NVML_VOLATILE_ECC (since the driver loaded)

// The entry points; each is null where the loaded library lacks it (older drivers, stand-ins).
struct NvmlApi {
  int (*init)() = nullptr;                                 // nvmlInit_v2
  int (*shutdown)() = nullptr;                             // nvmlShutdown
  int (*driver_version)(char*, unsigned) = nullptr;        // nvmlSystemGetDriverVersion
  int (*cuda_driver_version_v2)(int*) = nullptr;           // nvmlSystemGetCudaDriverVersion_v2
  int (*cuda_driver_version)(int*) = nullptr;              // nvmlSystemGetCudaDriverVersion
  int (*count)(unsigned*) = nullptr;                       // nvmlDeviceGetCount_v2
  int (*by_index)(unsigned, NvmlDevice*) = nullptr;        // nvmlDeviceGetHandleByIndex_v2
  int (*name)(NvmlDevice, char*, unsigned) = nullptr;      // nvmlDeviceGetName
  int (*uuid)(NvmlDevice, char*, unsigned) = nullptr;      // nvmlDeviceGetUUID
  int (*pci_info_v3)(NvmlDevice, NvmlPciInfo*) = nullptr;  // nvmlDeviceGetPciInfo_v3
  int (*pci_info_v2)(NvmlDevice, NvmlPciInfo*) = nullptr;  // nvmlDeviceGetPciInfo_v2
  int (*memory)(NvmlDevice, NvmlMemory*) = nullptr;        // nvmlDeviceGetMemoryInfo
  int (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;  // nvmlDeviceGetUtilizationRates
  int (*temperature)(NvmlDevice, int, unsigned*) = nullptr;    // nvmlDeviceGetTemperature
  int (*power)(NvmlDevice, unsigned*) = nullptr;  // nvmlDeviceGetPowerUsage, milliwatts
  int (*compute_capability)(NvmlDevice, int*, int*) = nullptr;  // ...GetCudaComputeCapability
  int (*common_ancestor)(NvmlDevice, NvmlDevice, int*) = nullptr;  // ...GetTopologyCommonAncestor
  int (*p2p_status)(NvmlDevice, NvmlDevice, int, int*) = nullptr;  // nvmlDeviceGetP2PStatus
  int (*nvlink_state)(NvmlDevice, unsigned, int*) = nullptr;       // nvmlDeviceGetNvLinkState
  int (*nvlink_remote_pci_info_v2)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  int (*total_ecc_errors)(NvmlDevice, int, int, unsigned long long*) = nullptr;  // ...TotalEccErrors
  int (*retired_pages_pending)(NvmlDevice, int*) = nullptr;  // ...RetiredPagesPendingStatus
  const char* (*error_string)(int) = nullptr;                // nvmlErrorString

  // Looks every entry point up in `library` (an open_library() handle; null gives all null).
  static NvmlApi resolve(void* library);
};

}  // namespace hvrun::nvidia
