#include "worker_lib/telemetry/gpu_sampler.h"

#include <cstdlib>
#include <optional>

#include "common/nvidia/dynamic_library.h"
#include "common/nvidia/nvml_api.h"

namespace hvrun::detail::telemetry {
namespace {

using Device = nvidia::NvmlDevice;
using PciInfo = nvidia::NvmlPciInfo;
using Memory = nvidia::NvmlMemory;
using Utilization = nvidia::NvmlUtilization;
constexpr int kSuccess = nvidia::kNvmlSuccess;
constexpr int kTemperatureGpu = nvidia::kNvmlTemperatureGpu;

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string part = text.substr(start, comma - start);
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    while (!part.empty() && part.back() == ' ') part.pop_back();
    parts.push_back(part);
    start = comma + 1;
  }
  return parts;
}

}  // namespace

struct NvmlSampler::Api : nvidia::NvmlApi {
  int (*pci)(Device, PciInfo*) = nullptr;  // v3, or v2 (the same layout) on older drivers
};

NvmlSampler::NvmlSampler(const std::string& library) {
  library_ = nvidia::open_library(library);
  if (library_ == nullptr) {
    why_not_ = library + " not found (no NVIDIA driver)";
    return;
  }
  auto api = std::make_unique<Api>();
  static_cast<nvidia::NvmlApi&>(*api) = nvidia::NvmlApi::resolve(library_);
  api->pci = api->pci_info_v3 != nullptr ? api->pci_info_v3 : api->pci_info_v2;
  if (api->init == nullptr || api->count == nullptr || api->by_index == nullptr) {
    why_not_ = library + " lacks nvmlInit_v2/nvmlDeviceGetCount_v2/nvmlDeviceGetHandleByIndex_v2";
    return;
  }
  if (int rc = api->init(); rc != kSuccess) {
    why_not_ = "nvmlInit_v2 failed (NVML error " + std::to_string(rc) + ")";
    return;
  }
  api_ = std::move(api);
}

NvmlSampler::~NvmlSampler() {
  if (api_ && api_->shutdown != nullptr) api_->shutdown();
  nvidia::close_library(library_);
}

std::vector<v1::GpuSample> NvmlSampler::sample(const char* cuda_visible_devices) const {
  std::vector<v1::GpuSample> samples;
  if (!api_) return samples;
  const Api& nvml = *api_;
  unsigned count = 0;
  if (nvml.count(&count) != kSuccess) return samples;
  std::vector<Device> devices(count, nullptr);
  for (unsigned i = 0; i < count; ++i)
    if (nvml.by_index(i, &devices[i]) != kSuccess) devices[i] = nullptr;

  auto uuid_of = [&](Device d) -> std::string {
    char text[96] = {};
    if (d == nullptr || nvml.uuid == nullptr || nvml.uuid(d, text, sizeof text) != kSuccess)
      return "";
    return text;
  };
  // The NVML index that CUDA_VISIBLE_DEVICES entry `entry` names, or nullopt (CUDA stops there).
  auto resolve = [&](const std::string& entry) -> std::optional<unsigned> {
    if (entry.empty()) return std::nullopt;
    if (entry.rfind("GPU-", 0) == 0) {
      std::optional<unsigned> found;
      for (unsigned i = 0; i < count; ++i) {
        if (uuid_of(devices[i]).rfind(entry, 0) != 0) continue;
        if (found) return std::nullopt;  // an ambiguous prefix names no GPU
        found = i;
      }
      return found;
    }
    char* end = nullptr;
    const long index = std::strtol(entry.c_str(), &end, 10);
    if (*end != '\0' || index < 0 || static_cast<unsigned long>(index) >= count)
      return std::nullopt;
    return static_cast<unsigned>(index);
  };

  std::vector<unsigned> visible;  // NVML indices, in CUDA ordinal order
  if (cuda_visible_devices == nullptr) {
    for (unsigned i = 0; i < count; ++i) visible.push_back(i);
  } else {
    for (const std::string& entry : split_commas(cuda_visible_devices)) {
      std::optional<unsigned> index = resolve(entry);
      if (!index) break;
      visible.push_back(*index);
    }
  }

  for (size_t ordinal = 0; ordinal < visible.size(); ++ordinal) {
    Device d = devices[visible[ordinal]];
    if (d == nullptr) continue;
    v1::GpuSample s;
    s.set_index(static_cast<int32_t>(ordinal));
    s.set_utilization_percent(-1);
    s.set_memory_used_bytes(-1);
    s.set_memory_total_bytes(-1);
    s.set_temperature_celsius(-1);
    s.set_power_watts(-1);
    char text[96] = {};
    if (nvml.name != nullptr && nvml.name(d, text, sizeof text) == kSuccess) s.set_name(text);
    PciInfo pci{};
    if (nvml.pci != nullptr && nvml.pci(d, &pci) == kSuccess) s.set_pci_bus_id(pci.bus_id);
    Utilization u{};
    if (nvml.utilization != nullptr && nvml.utilization(d, &u) == kSuccess)
      s.set_utilization_percent(u.gpu);
    Memory m{};
    if (nvml.memory != nullptr && nvml.memory(d, &m) == kSuccess) {
      s.set_memory_used_bytes(static_cast<int64_t>(m.used));
      s.set_memory_total_bytes(static_cast<int64_t>(m.total));
    }
    unsigned value = 0;
    if (nvml.temperature != nullptr && nvml.temperature(d, kTemperatureGpu, &value) == kSuccess)
      s.set_temperature_celsius(value);
    if (nvml.power != nullptr && nvml.power(d, &value) == kSuccess)
      s.set_power_watts(static_cast<double>(value) / 1000.0);
    samples.push_back(std::move(s));
  }
  return samples;
}

std::vector<v1::GpuSample> sample_gpus(const std::optional<std::string>& cuda_visible_devices) {
  // Loaded once; never unloaded (a worker may sample until its last heartbeat at exit).
  static NvmlSampler* const nvml = new NvmlSampler("libnvidia-ml.so.1");
  return nvml->sample(cuda_visible_devices ? cuda_visible_devices->c_str() : nullptr);
}

}  // namespace hvrun::detail::telemetry
