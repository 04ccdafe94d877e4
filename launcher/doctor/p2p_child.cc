// The body of `hvrun doctor --p2p-child BYTES ITERATIONS`: one process, every visible GPU, one
// NCCL communicator per GPU (ncclCommInitAll), an in-place float32 sum allreduce. Driver API and
// NCCL are dlopen()ed; the buffers live in each device's primary context, which is the one
// NCCL's runtime calls use. Prints one "p2p-result ..." line for the parent.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "launcher/doctor/p2p_test.h"

namespace hvrun::doctor {
namespace {

using CuResult = int;
using CuDevice = int;
using CuContext = void*;
using CuStream = void*;
using CuDevicePtr = unsigned long long;
using NcclComm = void*;
constexpr int kNcclFloat32 = 7;  // ncclFloat32
constexpr int kNcclSum = 0;      // ncclSum
constexpr unsigned kOneAsFloatBits = 0x3f800000u;

struct Api {
  CuResult (*cuInit)(unsigned);
  CuResult (*cuDeviceGetCount)(int*);
  CuResult (*cuDeviceGet)(CuDevice*, int);
  CuResult (*cuDevicePrimaryCtxRetain)(CuContext*, CuDevice);
  CuResult (*cuCtxSetCurrent)(CuContext);
  CuResult (*cuMemAlloc)(CuDevicePtr*, size_t);
  CuResult (*cuMemsetD32)(CuDevicePtr, unsigned, size_t);
  CuResult (*cuMemcpyDtoH)(void*, CuDevicePtr, size_t);
  CuResult (*cuStreamCreate)(CuStream*, unsigned);
  CuResult (*cuStreamSynchronize)(CuStream);
  int (*ncclCommInitAll)(NcclComm*, int, const int*);
  int (*ncclAllReduce)(const void*, void*, size_t, int, int, NcclComm, CuStream);
  int (*ncclGroupStart)();
  int (*ncclGroupEnd)();
  int (*ncclCommDestroy)(NcclComm);
  const char* (*ncclGetErrorString)(int);
};

template <typename Fn>
bool load(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
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
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (cuda == nullptr) return fail("libcuda.so.1 not found (no NVIDIA driver)");
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (nccl == nullptr) return fail("libnccl.so.2 not found");
  Api a{};
  bool ok = load(cuda, "cuInit", a.cuInit) && load(cuda, "cuDeviceGetCount", a.cuDeviceGetCount) &&
            load(cuda, "cuDeviceGet", a.cuDeviceGet) &&
            load(cuda, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain) &&
            load(cuda, "cuCtxSetCurrent", a.cuCtxSetCurrent) && load(cuda, "cuMemAlloc_v2", a.cuMemAlloc) &&
            load(cuda, "cuMemsetD32_v2", a.cuMemsetD32) && load(cuda, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH) &&
            load(cuda, "cuStreamCreate", a.cuStreamCreate) &&
            load(cuda, "cuStreamSynchronize", a.cuStreamSynchronize) &&
            load(nccl, "ncclCommInitAll", a.ncclCommInitAll) && load(nccl, "ncclAllReduce", a.ncclAllReduce) &&
            load(nccl, "ncclGroupStart", a.ncclGroupStart) && load(nccl, "ncclGroupEnd", a.ncclGroupEnd) &&
            load(nccl, "ncclCommDestroy", a.ncclCommDestroy) &&
            load(nccl, "ncclGetErrorString", a.ncclGetErrorString);
  if (!ok) return fail("libcuda.so.1 or libnccl.so.2 lacks a needed symbol");
  if (int rc = a.cuInit(0); rc != 0) return fail("cuInit failed (CUDA error " + std::to_string(rc) + ")");
  int n = 0;
  a.cuDeviceGetCount(&n);
  if (n < 2) return fail("fewer than 2 GPUs visible (" + std::to_string(n) + ")");
  const size_t count = bytes / sizeof(float);
  std::vector<CuContext> ctx(static_cast<size_t>(n));
  std::vector<CuDevicePtr> buf(static_cast<size_t>(n));
  std::vector<CuStream> stream(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    CuDevice dev = 0;
    const size_t k = static_cast<size_t>(i);
    if (a.cuDeviceGet(&dev, i) != 0 || a.cuDevicePrimaryCtxRetain(&ctx[k], dev) != 0 ||
        a.cuCtxSetCurrent(ctx[k]) != 0 || a.cuMemAlloc(&buf[k], count * sizeof(float)) != 0 ||
        a.cuMemsetD32(buf[k], kOneAsFloatBits, count) != 0 || a.cuStreamCreate(&stream[k], 0) != 0)
      return fail("allocating " + std::to_string(bytes >> 20) + " MiB on GPU " + std::to_string(i) + " failed");
  }
  std::vector<NcclComm> comms(static_cast<size_t>(n));
  if (int rc = a.ncclCommInitAll(comms.data(), n, nullptr); rc != 0)
    return fail(std::string("ncclCommInitAll: ") + a.ncclGetErrorString(rc));
  auto allreduce = [&]() -> int {
    a.ncclGroupStart();
    for (int i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      a.cuCtxSetCurrent(ctx[k]);
      int rc = a.ncclAllReduce(reinterpret_cast<void*>(buf[k]), reinterpret_cast<void*>(buf[k]),
                               count, kNcclFloat32, kNcclSum, comms[k], stream[k]);
      if (rc != 0) {
        a.ncclGroupEnd();
        return rc;
      }
    }
    int rc = a.ncclGroupEnd();
    for (int i = 0; i < n; ++i) {
      a.cuCtxSetCurrent(ctx[static_cast<size_t>(i)]);
      a.cuStreamSynchronize(stream[static_cast<size_t>(i)]);
    }
    return rc;
  };
  // First allreduce of all-ones: every element must be n on every GPU.
  if (int rc = allreduce(); rc != 0) return fail(std::string("ncclAllReduce: ") + a.ncclGetErrorString(rc));
  long wrong = 0;
  std::vector<float> host(count < 4096 ? count : 4096);
  for (int i = 0; i < n; ++i) {
    a.cuCtxSetCurrent(ctx[static_cast<size_t>(i)]);
    a.cuMemcpyDtoH(host.data(), buf[static_cast<size_t>(i)], host.size() * sizeof(float));
    for (float v : host) wrong += v != static_cast<float>(n);
  }
  // Reset to zeros so repeated sums stay finite, then time.
  for (int i = 0; i < n; ++i) {
    a.cuCtxSetCurrent(ctx[static_cast<size_t>(i)]);
    a.cuMemsetD32(buf[static_cast<size_t>(i)], 0, count);
  }
  auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it)
    if (int rc = allreduce(); rc != 0) return fail(std::string("ncclAllReduce: ") + a.ncclGetErrorString(rc));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                   iterations;
  double busbw = static_cast<double>(bytes) * 2.0 * (n - 1) / n / seconds / 1e9;
  for (NcclComm c : comms) a.ncclCommDestroy(c);
  std::printf("p2p-result ok=1 gpus=%d seconds=%.9f busbw=%.3f wrong=%ld\n", n, seconds, busbw, wrong);
  std::fflush(stdout);
  return 0;
}

}  // namespace hvrun::doctor
