// worker_lib/telemetry/gpu_sampler: the no-NVML path for real (this machine has no driver), and
// the NVML path against a STAND-IN library (tests/metrics/fake_nvml: scripted GPUs, not NVIDIA's
// libnvidia-ml). Real GPUs: scripts/gpu-check's "metrics" step scrapes a GPU job's /metrics.
#include "worker_lib/telemetry/gpu_sampler.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include "tests/support/subprocess.h"

namespace hvrun::detail::telemetry {
namespace {

std::string stand_in_path() { return test::bin_path("metrics_fake_nvml/libnvidia-ml.so.1"); }

TEST(GpuSampler, WithoutNvmlTheSampleIsEmpty) {
  NvmlSampler missing("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(missing.loaded());
  EXPECT_NE(missing.why_not_loaded().find("not found"), std::string::npos)
      << missing.why_not_loaded();
  EXPECT_TRUE(missing.sample(nullptr).empty());
  EXPECT_TRUE(missing.sample("0,1").empty());
}

TEST(GpuSampler, ThisMachinesSampleMatchesItsDriver) {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml != nullptr) {
    dlclose(nvml);
    GTEST_SKIP() << "this machine has NVML: scripts/gpu-check covers real GPUs";
  }
  EXPECT_TRUE(sample_gpus(std::nullopt).empty());
  EXPECT_TRUE(sample_gpus(std::nullopt).empty());  // loaded once, still empty
}

TEST(GpuSampler, StandInLibraryAllGpusWithUnreadableValuesAsMinusOne) {
  NvmlSampler nvml(stand_in_path());
  ASSERT_TRUE(nvml.loaded()) << nvml.why_not_loaded();
  auto gpus = nvml.sample(nullptr);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0].index(), 0);
  EXPECT_EQ(gpus[0].name(), "Fake GPU A");
  EXPECT_EQ(gpus[0].pci_bus_id(), "00000000:18:00.0");
  EXPECT_EQ(gpus[0].utilization_percent(), 55);
  EXPECT_EQ(gpus[0].memory_total_bytes(), 80LL << 30);
  EXPECT_EQ(gpus[0].memory_used_bytes(), 10LL << 30);
  EXPECT_EQ(gpus[0].temperature_celsius(), 40);
  EXPECT_DOUBLE_EQ(gpus[0].power_watts(), 300.5);
  EXPECT_EQ(gpus[1].utilization_percent(), -1);
  EXPECT_EQ(gpus[1].temperature_celsius(), -1);
  EXPECT_EQ(gpus[1].memory_used_bytes(), 20LL << 30);
  EXPECT_DOUBLE_EQ(gpus[1].power_watts(), 250);
  EXPECT_EQ(gpus[2].power_watts(), -1);
  EXPECT_EQ(gpus[2].utilization_percent(), 99);
}

TEST(GpuSampler, StandInLibraryCudaVisibleDevicesGivesCudaOrdinals) {
  NvmlSampler nvml(stand_in_path());
  ASSERT_TRUE(nvml.loaded()) << nvml.why_not_loaded();
  auto two = nvml.sample("2,0");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].index(), 0);  // CUDA ordinal 0 is NVML's GPU 2
  EXPECT_EQ(two[0].name(), "Fake GPU C");
  EXPECT_EQ(two[1].index(), 1);
  EXPECT_EQ(two[1].name(), "Fake GPU A");
  auto by_uuid = nvml.sample("GPU-bbbb");  // a unique UUID prefix
  ASSERT_EQ(by_uuid.size(), 1u);
  EXPECT_EQ(by_uuid[0].name(), "Fake GPU B");
  EXPECT_EQ(nvml.sample("GPU-a").size(), 0u);  // ambiguous (GPU-aaaa, GPU-abcd): CUDA stops
  auto stops = nvml.sample("1,7,0");           // CUDA ignores everything from an invalid entry on
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].name(), "Fake GPU B");
  EXPECT_TRUE(nvml.sample("").empty());
  EXPECT_TRUE(nvml.sample("MIG-4f3c0d2e-0000").empty());
  EXPECT_EQ(nvml.sample(" 0 , 1").size(), 2u);
}

}  // namespace
}  // namespace hvrun::detail::telemetry
