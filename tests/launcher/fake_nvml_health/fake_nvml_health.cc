// STAND-IN for libnvidia-ml.so.1 (NOT NVIDIA's library): two scripted "GPUs" so that the health
// check's NVML path (launcher/health/health_checks.cc) runs on machines without a driver. Only
// launcher_health_test loads it, by path. GPU 0 is sound; GPU 1 has the fault named by
// FAKE_NVML_FAULT: "ecc" (3 uncorrected volatile ECC errors), "pages" (a page retirement
// waiting for a reset), "lost" (its handle answers NVML_ERROR_GPU_IS_LOST); none otherwise.
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kGpuIsLost = 15;
constexpr unsigned kCount = 2;

int gpus[kCount] = {0, 1};  // a handle points at its index

std::string fault() {
  const char* f = std::getenv("FAKE_NVML_FAULT");
  return f ? f : "";
}

}  // namespace

extern "C" {

int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int rc) { return rc == kGpuIsLost ? "GPU is lost" : "stand-in error"; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kCount;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= kCount) return kInvalidArgument;
  if (index == 1 && fault() == "lost") return kGpuIsLost;
  *device = &gpus[index];
  return kSuccess;
}
int nvmlDeviceGetUUID(void* device, char* uuid, unsigned length) {
  const int index = *static_cast<int*>(device);
  const std::string text = "GPU-fake000" + std::to_string(index);
  if (length <= text.size()) return kInvalidArgument;
  std::memcpy(uuid, text.c_str(), text.size() + 1);
  return kSuccess;
}
int nvmlDeviceGetTotalEccErrors(void* device, int error_type, int counter_type,
                                unsigned long long* count) {
  const int index = *static_cast<int*>(device);
  // Only uncorrected (1), volatile (0) errors are scripted.
  *count = index == 1 && fault() == "ecc" && error_type == 1 && counter_type == 0 ? 3 : 0;
  return kSuccess;
}
int nvmlDeviceGetRetiredPagesPendingStatus(void* device, int* pending) {
  const int index = *static_cast<int*>(device);
  *pending = index == 1 && fault() == "pages" ? 1 : 0;
  return kSuccess;
}

}  // extern "C"
