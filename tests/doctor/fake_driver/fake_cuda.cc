// A stand-in for libcuda.so.1 with two "GPUs" in host memory, so the doctor's driver probe and
// its P2P test (fork, environment, timeout, result parsing, verdicts) run on a machine without a
// GPU. Only what hvrun's doctor calls exists; every call succeeds. FAKE_GPU_NAME names the GPUs.
#include <cstdlib>
#include <cstring>
#include <cstdio>

extern "C" {

int cuInit(unsigned) { return 0; }
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
int cuDeviceGetCount(int* n) { *n = 2; return 0; }
int cuDeviceGet(int* dev, int ordinal) { *dev = ordinal; return 0; }
int cuDeviceGetPCIBusId(char* out, int len, int dev) {
  std::snprintf(out, static_cast<size_t>(len), "0000:%02x:00.0", 0x10 + dev);
  return 0;
}
int cuDeviceGetName(char* out, int len, int) {
  const char* name = std::getenv("FAKE_GPU_NAME");
  std::snprintf(out, static_cast<size_t>(len), "%s", name != nullptr ? name : "Fake GPU");
  return 0;
}
int cuDeviceTotalMem_v2(size_t* bytes, int) { *bytes = size_t{16} << 30; return 0; }
int cuDeviceGetAttribute(int* value, int attribute, int) {
  *value = attribute == 75 ? 9 : 0;  // compute capability 9.0
  return 0;
}
int cuDeviceCanAccessPeer(int* ok, int, int) { *ok = 1; return 0; }
int cuDevicePrimaryCtxRetain(void** ctx, int dev) {
  *ctx = reinterpret_cast<void*>(static_cast<long>(dev) + 1);
  return 0;
}
int cuCtxSetCurrent(void*) { return 0; }
int cuMemAlloc_v2(unsigned long long* ptr, size_t bytes) {
  *ptr = reinterpret_cast<unsigned long long>(std::malloc(bytes));
  return *ptr == 0 ? 2 : 0;
}
int cuMemsetD32_v2(unsigned long long ptr, unsigned value, size_t count) {
  auto* p = reinterpret_cast<unsigned*>(ptr);
  for (size_t i = 0; i < count; ++i) p[i] = value;
  return 0;
}
int cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<void*>(src), bytes);
  return 0;
}
int cuStreamCreate(void** stream, unsigned) { *stream = nullptr; return 0; }
int cuStreamSynchronize(void*) { return 0; }

}  // extern "C"
