#include "common/nvidia/nvml_api.h"

#include "common/nvidia/dynamic_library.h"

namespace hvrun::nvidia {

NvmlApi NvmlApi::resolve(void* library) {
  NvmlApi api;
  bind_function(library, "nvmlInit_v2", api.init);
  bind_function(library, "nvmlShutdown", api.shutdown);
  bind_function(library, "nvmlSystemGetDriverVersion", api.driver_version);
  bind_function(library, "nvmlSystemGetCudaDriverVersion_v2", api.cuda_driver_version_v2);
  bind_function(library, "nvmlSystemGetCudaDriverVersion", api.cuda_driver_version);
  bind_function(library, "nvmlDeviceGetCount_v2", api.count);
  bind_function(library, "nvmlDeviceGetHandleByIndex_v2", api.by_index);
  bind_function(library, "nvmlDeviceGetName", api.name);
  bind_function(library, "nvmlDeviceGetUUID", api.uuid);
  bind_function(library, "nvmlDeviceGetPciInfo_v3", api.pci_info_v3);
  bind_function(library, "nvmlDeviceGetPciInfo_v2", api.pci_info_v2);
  bind_function(library, "nvmlDeviceGetMemoryInfo", api.memory);
  bind_function(library, "nvmlDeviceGetUtilizationRates", api.utilization);
  bind_function(library, "nvmlDeviceGetTemperature", api.temperature);
  bind_function(library, "nvmlDeviceGetPowerUsage", api.power);
  bind_function(library, "nvmlDeviceGetCudaComputeCapability", api.compute_capability);
  bind_function(library, "nvmlDeviceGetTopologyCommonAncestor", api.common_ancestor);
  bind_function(library, "nvmlDeviceGetP2PStatus", api.p2p_status);
  bind_function(library, "nvmlDeviceGetNvLinkState", api.nvlink_state);
  bind_function(library, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.nvlink_remote_pci_info_v2);
  bind_function(library, "nvmlDeviceGetTotalEccErrors", api.total_ecc_errors);
  bind_function(library, "nvmlDeviceGetRetiredPagesPendingStatus", api.retired_pages_pending);
  bind_function(library, "nvmlErrorString", api.error_string);
  return api;
}

}  // namespace hvrun::nvidia
