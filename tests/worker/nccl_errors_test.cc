// The GPU data plane's error messages and plugin loading, on a machine without a GPU: what a
// user reads when NCCL fails, two ranks share a GPU, the plugin or NCCL is missing, or the
// build has no CUDA.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/build_info.h"
#include "worker_lib/backends/nccl/nccl_errors.h"
#include "worker_lib/backends/nccl/plugin_loader.h"

namespace hvrun::detail::cuda {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const RankIdentity kWho{.rank = 3, .size = 8, .host = "node7", .gpu = "GPU 3 (NVIDIA H200, PCI 0000:9b:00.0)"};

TEST(NcclErrors, RemoteErrorNamesRankHostGpuNcclsWordsAndHints) {
  Status s = nccl_failure_status(kWho, {.what = "ncclAllReduce of 4096 float32",
                                        .code = 6,
                                        .description = "remote process exited or there was a network error",
                                        .last_error = "socketProgress: Connection closed by remote peer"});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  const std::string& m = s.message();
  for (const char* part : {"NCCL ncclAllReduce of 4096 float32 failed", "rank 3 of 8", "host node7",
                           "GPU 3 (NVIDIA H200, PCI 0000:9b:00.0)", "ncclRemoteError",
                           "Connection closed by remote peer", "NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME"})
    EXPECT_TRUE(contains(m, part)) << "missing '" << part << "' in: " << m;
}

TEST(NcclErrors, CudaErrorSuggestsPeerToPeerOff) {
  Status s = nccl_failure_status(kWho, {.what = "ncclBroadcast", .code = 1});
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(contains(s.message(), "ncclUnhandledCudaError")) << s.message();
  EXPECT_TRUE(contains(s.message(), "NCCL_P2P_DISABLE=1")) << s.message();
  EXPECT_TRUE(contains(s.message(), "--nccl-p2p off")) << s.message();
}

TEST(NcclErrors, TimeoutSaysTheCommunicatorWasAbortedAndWhatToTry) {
  Status s = gpu_timeout_status(kWho, "ncclAllReduce of 8 float32", std::chrono::seconds(30));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  for (const char* part : {"rank 3 of 8", "within the op timeout (30 s, --op-timeout)", "aborted",
                           "NCCL_P2P_DISABLE=1", "NCCL_DEBUG=INFO"})
    EXPECT_TRUE(contains(s.message(), part)) << "missing '" << part << "' in: " << s.message();
}

TEST(NcclErrors, NoDriverTellsWhatToCheck) {
  Status s = cuda_failure_status({.rank = 0, .size = 1, .host = "ci"}, "cudaGetDeviceCount",
                                 "cudaErrorInsufficientDriver", "CUDA driver version is insufficient");
  EXPECT_TRUE(contains(s.message(), "rank 0 of 1 on host ci")) << s.message();
  EXPECT_TRUE(contains(s.message(), "nvidia-smi")) << s.message();
  EXPECT_TRUE(contains(s.message(), "--device cpu")) << s.message();
}

TEST(NcclErrors, TwoRanksOnOneGpuAreNamedBeforeNcclSaysDuplicateGpu) {
  std::vector<GpuOfRank> ranks{{"a", "0000:01:00.0", 0}, {"a", "0000:02:00.0", 1},
                               {"b", "0000:01:00.0", 0}, {"a", "0000:01:00.0", 2}};
  Status s = check_one_gpu_per_rank(ranks);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  for (const char* part : {"ranks 0 and 3 on host a", "PCI 0000:01:00.0", "one GPU per rank",
                           "Duplicate GPU detected", "hvrun -np"})
    EXPECT_TRUE(contains(s.message(), part)) << "missing '" << part << "' in: " << s.message();
  ranks.pop_back();
  EXPECT_TRUE(check_one_gpu_per_rank(ranks).is_ok()) << "same bus id on another host is fine";
}

TEST(NcclErrors, MissingNcclPointsAtPytorchsCopy) {
  Status s = plugin_missing_status(
      {{"/opt/hvrun/lib/libhvrun_cuda.so", "libnccl.so.2: cannot open shared object file: No such file or directory"}},
      true);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  for (const char* part : {"/opt/hvrun/lib/libhvrun_cuda.so", "libnccl.so.2: cannot open",
                           "LD_LIBRARY_PATH", "nvidia.nccl"})
    EXPECT_TRUE(contains(s.message(), part)) << "missing '" << part << "' in: " << s.message();
}

TEST(NcclErrors, CudaTensorOnACpuOnlyBuildSaysHowToGetCuda) {
  Status s = cuda_not_built_status("grad.w");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(contains(s.message(), "tensor 'grad.w' is a CUDA tensor")) << s.message();
  EXPECT_TRUE(contains(s.message(), "HVRUN_WITH_CUDA=ON")) << s.message();
}

TEST(PluginLoader, NothingToLoadListsEveryPlaceTried) {
  auto plane = load_device_plane({}, {"/nonexistent/libhvrun_cuda.so", "libhvrun_cuda_missing.so"});
  ASSERT_FALSE(plane.is_ok());
  const std::string& m = plane.status().message();
  EXPECT_EQ(plane.status().code(), StatusCode::kFailedPrecondition);
  if (build_info().have_cuda) {
    EXPECT_TRUE(contains(m, "/nonexistent/libhvrun_cuda.so: ")) << m;
    EXPECT_TRUE(contains(m, "libhvrun_cuda_missing.so: ")) << m;
    EXPECT_TRUE(contains(m, "LD_LIBRARY_PATH")) << m;
  } else {
    EXPECT_TRUE(contains(m, "built without CUDA")) << m;
  }
}

TEST(PluginLoader, ASharedLibraryThatIsNoPluginIsRefused) {
  // libc is certainly there and certainly not an hvrun plugin.
  auto plane = load_device_plane({}, {"libc.so.6"});
  ASSERT_FALSE(plane.is_ok());
  if (build_info().have_cuda) {
    EXPECT_TRUE(contains(plane.status().message(), "libc.so.6: not an hvrun CUDA plugin"))
        << plane.status().message();
  }
}

// The real plugin from this build: it loads (NCCL is found through its RUNPATH); on a machine
// without a GPU, asking for devices fails with the no-driver message, never a crash.
TEST(PluginLoader, TheBuiltPluginLoadsAndReportsTheMachinesGpus) {
  if (!build_info().have_cuda) GTEST_SKIP() << "this build has no CUDA data plane";
  auto candidates = default_plugin_candidates();
  ASSERT_FALSE(candidates.empty());
  auto plane = load_device_plane({.rank = 0, .size = 1, .host = "test"}, candidates);
  ASSERT_TRUE(plane.is_ok()) << plane.status().to_string();
  EXPECT_NE((*plane)->nccl_version(), "unknown");
  auto count = (*plane)->device_count();
  if (count.is_ok()) {
    std::printf("this machine has %d CUDA device(s)\n", *count);
  } else {
    EXPECT_TRUE(contains(count.status().message(), "CUDA cudaGetDeviceCount failed on rank 0 of 1"))
        << count.status().message();
    std::printf("no GPU here, as reported: %s\n", count.status().message().c_str());
  }
}

// NCCL's newer functions are found at run time in the loaded libnccl (never linked: the plugin
// must load beside an older NCCL): what the plane says it uses follows the running version.
TEST(PluginLoader, TheBuiltPluginFindsTheRunningNcclsOptionalFunctions) {
  if (!build_info().have_cuda) GTEST_SKIP() << "this build has no CUDA data plane";
  auto plane = load_device_plane({.rank = 0, .size = 1, .host = "test"}, default_plugin_candidates());
  ASSERT_TRUE(plane.is_ok()) << plane.status().to_string();
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf((*plane)->nccl_version().c_str(), "%d.%d", &major, &minor), 2)
      << (*plane)->nccl_version();
  const int version = major * 100 + minor;
  const std::string features = (*plane)->features();
  std::printf("NCCL %s: %s\n", (*plane)->nccl_version().c_str(), features.c_str());
  EXPECT_EQ(contains(features, "registered with NCCL once made (ncclCommRegister)"), version >= 219) << features;
  // The elastic reset shrinks where this NCCL has ncclCommRevoke and ncclCommShrink, and says
  // why it aborts and inits where not.
  const bool shrinks = contains(features, "elastic reset: shrink (ncclCommRevoke + ncclCommShrink) when ranks only leave");
  EXPECT_EQ(shrinks, (*plane)->shrink_support().is_ok()) << features;
  EXPECT_EQ(shrinks, version >= 228) << features;
  if (!shrinks) {
    EXPECT_TRUE(contains(features, "elastic reset: abort and init (this NCCL")) << features;
  }
}

}  // namespace
}  // namespace hvrun::detail::cuda
