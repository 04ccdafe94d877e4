#include "common/nvidia/cuda_driver_api.h"

#include "common/nvidia/dynamic_library.h"

namespace hvrun::nvidia {

CudaDriverApi CudaDriverApi::resolve(void* library) {
  CudaDriverApi api;
  bind_function(library, "cuInit", api.init);
  bind_function(library, "cuDriverGetVersion", api.driver_version);
  bind_function(library, "cuDeviceGetCount", api.device_count);
  bind_function(library, "cuDeviceGet", api.device_get);
  bind_function(library, "cuDeviceGetPCIBusId", api.pci_bus_id);
  bind_function(library, "cuDeviceGetName", api.device_name);
  bind_function(library, "cuDeviceTotalMem_v2", api.total_memory);
  bind_function(library, "cuDeviceGetAttribute", api.attribute);
  bind_function(library, "cuDeviceCanAccessPeer", api.can_access_peer);
  bind_function(library, "cuDevicePrimaryCtxRetain", api.primary_context_retain);
  bind_function(library, "cuCtxSetCurrent", api.context_set_current);
  bind_function(library, "cuMemAlloc_v2", api.mem_alloc);
  bind_function(library, "cuMemsetD32_v2", api.memset_d32);
  bind_function(library, "cuMemcpyDtoH_v2", api.memcpy_dtoh);
  bind_function(library, "cuStreamCreate", api.stream_create);
  bind_function(library, "cuStreamSynchronize", api.stream_synchronize);
  return api;
}

}  // namespace hvrun::nvidia
