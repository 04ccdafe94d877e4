// The CUDA driver API (libcuda.so.1) as hvrun uses it, with cuda.h's C signatures: devices are
// ints, contexts and streams opaque pointers, device memory a 64-bit address, results ints with
// 0 = CUDA_SUCCESS. Entry points are looked up by name; cuda.h is not needed to build.
#pragma once

#include <cstddef>

namespace hvrun::nvidia {

inline constexpr const char* kCudaDriverLibrary = "libcuda.so.1";

using CuDevice = int;
using CuContext = void*;
using CuStream = void*;
using CuDevicePtr = unsigned long long;

inline constexpr int kCuErrorNoDevice = 100;                 // CUDA_ERROR_NO_DEVICE
inline constexpr int kCuAttributeComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_...
inline constexpr int kCuAttributeComputeCapabilityMinor = 76;

// The entry points; each is null where the loaded library lacks it (stand-ins in tests).
struct CudaDriverApi {
  int (*init)(unsigned) = nullptr;                        // cuInit
  int (*driver_version)(int*) = nullptr;                  // cuDriverGetVersion
  int (*device_count)(int*) = nullptr;                    // cuDeviceGetCount
  int (*device_get)(CuDevice*, int) = nullptr;            // cuDeviceGet
  int (*pci_bus_id)(char*, int, CuDevice) = nullptr;      // cuDeviceGetPCIBusId
  int (*device_name)(char*, int, CuDevice) = nullptr;     // cuDeviceGetName
  int (*total_memory)(size_t*, CuDevice) = nullptr;       // cuDeviceTotalMem_v2
  int (*attribute)(int*, int, CuDevice) = nullptr;        // cuDeviceGetAttribute
  int (*can_access_peer)(int*, CuDevice, CuDevice) = nullptr;  // cuDeviceCanAccessPeer
  int (*primary_context_retain)(CuContext*, CuDevice) = nullptr;  // cuDevicePrimaryCtxRetain
  int (*context_set_current)(CuContext) = nullptr;               // cuCtxSetCurrent
  int (*mem_alloc)(CuDevicePtr*, size_t) = nullptr;              // cuMemAlloc_v2
  int (*memset_d32)(CuDevicePtr, unsigned, size_t) = nullptr;    // cuMemsetD32_v2
  int (*memcpy_dtoh)(void*, CuDevicePtr, size_t) = nullptr;      // cuMemcpyDtoH_v2
  int (*stream_create)(CuStream*, unsigned) = nullptr;           // cuStreamCreate
  int (*stream_synchronize)(CuStream) = nullptr;                 // cuStreamSynchronize

  // Looks every entry point up in `library` (an open_library() handle; null gives all null).
  static CudaDriverApi resolve(void* library);
};

}  // namespace hvrun::nvidia
