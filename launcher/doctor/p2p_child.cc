// The body of `hvrun doctor --p2p-child BYTES ITERATIONS`: one process, every visible GPU, one
// NCCL communicator per GPU (ncclCommInitAll), an in-place float32 sum allreduce. Driver API and
// NCCL are dlopen()ed; the buffers live in each device's primary context, which is the one
// NCCL's runtime calls use. Prints one "p2p-result ..." line for the parent.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/nvidia/cuda_driver_api.h"
#include "common/nvidia/dynamic_library.h"
#include "launcher/doctor/p2p_test.h"

namespace hvrun::doctor {
namespace {

using nvidia::CuContext;
using nvidia::CuDevice;
using nvidia::CuDevicePtr;
using nvidia::CuStream;
using NcclComm = void*;
constexpr int kNcclFloat32 = 7;  // ncclFloat32
constexpr int kNcclSum = 0;      // ncclSum
constexpr unsigned kOneAsFloatBits = 0x3f800000u;

// The NCCL entry points this test calls (only here: the worker library links NCCL instead).
struct NcclApi {
  int (*comm_init_all)(NcclComm*, int, const int*) = nullptr;
  int (*all_reduce)(const void*, void*, size_t, int, int, NcclComm, CuStream) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  int (*comm_destroy)(NcclComm) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

NcclApi resolve_nccl(void* library) {
  NcclApi api;
  nvidia::bind_function(library, "ncclCommInitAll", api.comm_init_all);
  nvidia::bind_function(library, "ncclAllReduce", api.all_reduce);
  nvidia::bind_function(library, "ncclGroupStart", api.group_start);
  nvidia::bind_function(library, "ncclGroupEnd", api.group_end);
  nvidia::bind_function(library, "ncclCommDestroy", api.comm_destroy);
  nvidia::bind_function(library, "ncclGetErrorString", api.error_string);
  return api;
}

int fail(const std::string& why) {
  std::printf("p2p-result ok=0 error=%s\n", why.c_str());
  std::fflush(stdout);
  return 1;
}

}  // namespace

int run_p2p_child(const std::vector<std::string>& args) {
  size_t bytes = args.size() > 1 ? std::stoull(args[1]) : (64u << 20);
  int iterations = args.size() > 2 ? std::stoi(args[2]) : 20;
  // Both stay loaded until the process ends; global, so that NCCL loaded second resolves the
  // driver symbols it needs against this same copy.
  void* cuda_library = nvidia::open_library(nvidia::kCudaDriverLibrary, nvidia::SymbolScope::kGlobal);
  if (cuda_library == nullptr) return fail("libcuda.so.1 not found (no NVIDIA driver)");
  void* nccl_library = nvidia::open_library("libnccl.so.2", nvidia::SymbolScope::kGlobal);
  if (nccl_library == nullptr) return fail("libnccl.so.2 not found");
  const nvidia::CudaDriverApi cu = nvidia::CudaDriverApi::resolve(cuda_library);
  const NcclApi nccl = resolve_nccl(nccl_library);
  const bool ok = cu.init && cu.device_count && cu.device_get && cu.primary_context_retain &&
                  cu.context_set_current && cu.mem_alloc && cu.memset_d32 && cu.memcpy_dtoh &&
                  cu.stream_create && cu.stream_synchronize && nccl.comm_init_all &&
                  nccl.all_reduce && nccl.group_start && nccl.group_end && nccl.comm_destroy &&
                  nccl.error_string;
  if (!ok) return fail("libcuda.so.1 or libnccl.so.2 lacks a needed symbol");
  if (int rc = cu.init(0); rc != 0) return fail("cuInit failed (CUDA error " + std::to_string(rc) + ")");
  int n = 0;
  cu.device_count(&n);
  if (n < 2) return fail("fewer than 2 GPUs visible (" + std::to_string(n) + ")");
  const size_t count = bytes / sizeof(float);
  std::vector<CuContext> ctx(static_cast<size_t>(n));
  std::vector<CuDevicePtr> buf(static_cast<size_t>(n));
  std::vector<CuStream> stream(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    CuDevice dev = 0;
    const size_t k = static_cast<size_t>(i);
    if (cu.device_get(&dev, i) != 0 || cu.primary_context_retain(&ctx[k], dev) != 0 ||
        cu.context_set_current(ctx[k]) != 0 || cu.mem_alloc(&buf[k], count * sizeof(float)) != 0 ||
        cu.memset_d32(buf[k], kOneAsFloatBits, count) != 0 || cu.stream_create(&stream[k], 0) != 0)
      return fail("allocating " + std::to_string(bytes >> 20) + " MiB on GPU " + std::to_string(i) + " failed");
  }
  std::vector<NcclComm> comms(static_cast<size_t>(n));
  if (int rc = nccl.comm_init_all(comms.data(), n, nullptr); rc != 0)
    return fail(std::string("ncclCommInitAll: ") + nccl.error_string(rc));
  auto allreduce = [&]() -> int {
    nccl.group_start();
    for (int i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      cu.context_set_current(ctx[k]);
      int rc = nccl.all_reduce(reinterpret_cast<void*>(buf[k]), reinterpret_cast<void*>(buf[k]),
                               count, kNcclFloat32, kNcclSum, comms[k], stream[k]);
      if (rc != 0) {
        nccl.group_end();
        return rc;
      }
    }
    int rc = nccl.group_end();
    for (int i = 0; i < n; ++i) {
      cu.context_set_current(ctx[static_cast<size_t>(i)]);
      cu.stream_synchronize(stream[static_cast<size_t>(i)]);
    }
    return rc;
  };
  // First allreduce of all-ones: every element must be n on every GPU.
  if (int rc = allreduce(); rc != 0) return fail(std::string("ncclAllReduce: ") + nccl.error_string(rc));
  long wrong = 0;
  std::vector<float> host(count < 4096 ? count : 4096);
  for (int i = 0; i < n; ++i) {
    cu.context_set_current(ctx[static_cast<size_t>(i)]);
    cu.memcpy_dtoh(host.data(), buf[static_cast<size_t>(i)], host.size() * sizeof(float));
    for (float v : host) wrong += v != static_cast<float>(n);
  }
  // Reset to zeros so repeated sums stay finite, then time.
  for (int i = 0; i < n; ++i) {
    cu.context_set_current(ctx[static_cast<size_t>(i)]);
    cu.memset_d32(buf[static_cast<size_t>(i)], 0, count);
  }
  auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it)
    if (int rc = allreduce(); rc != 0) return fail(std::string("ncclAllReduce: ") + nccl.error_string(rc));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                   iterations;
  double busbw = static_cast<double>(bytes) * 2.0 * (n - 1) / n / seconds / 1e9;
  for (NcclComm c : comms) nccl.comm_destroy(c);
  std::printf("p2p-result ok=1 gpus=%d seconds=%.9f busbw=%.3f wrong=%ld\n", n, seconds, busbw, wrong);
  std::fflush(stdout);
  return 0;
}

}  // namespace hvrun::doctor
