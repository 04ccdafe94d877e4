// One rank of the GPU tests and of scripts/gpu-check, run under hvrun (except kernels-bench):
//
//   hvrun -np 1 hvrun_gpu_worker collectives   every collective on CUDA tensors, checked
//   hvrun -np 1 hvrun_gpu_worker abort         a collective stuck behind its stream is failed
//                                              promptly by abort(), naming the reason
//   hvrun -np 1 --op-timeout 8 hvrun_gpu_worker timeout
//                                              the same collective fails at the op timeout
//   hvrun -np 1 hvrun_gpu_worker no-gpu        (machines without a GPU) the error a CUDA tensor gets
//   hvrun -np 1 hvrun_gpu_worker bench         per-step time of N fused allreduces through hvrun
//                                              beside one raw ncclAllReduce of the same bytes
//   hvrun_gpu_worker kernels-bench             the pack kernel, every transform and dtype, against
//                                              cudaMemcpy D2D of the same bytes
//
// Prints "PASS ..." / "FAIL ..." lines and tables; exits non-zero on any failure.
#include <cuda_runtime.h>  // the typed cudaMalloc overloads
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/gpu/spin_kernel.h"
#include "worker_lib/backends/nccl/plugin/fusion_kernels.h"
#include "worker_lib/backends/nccl/segment_table.h"

namespace {

using Clock = std::chrono::steady_clock;
using hvrun::DataType;
using hvrun::Device;

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
  ++failures;
  return false;
}

// A device copy of `host` on `stream`.
template <typename T>
T* upload(const std::vector<T>& host, cudaStream_t stream) {
  T* d = nullptr;
  cuda_ok(cudaMalloc(&d, std::max<size_t>(host.size(), 1) * sizeof(T)), "cudaMalloc");
  cuda_ok(cudaMemcpyAsync(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream), "upload");
  return d;
}

template <typename T>
std::vector<T> download(const void* device, size_t count, cudaStream_t stream) {
  std::vector<T> host(count);
  cuda_ok(cudaMemcpyAsync(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost, stream), "download");
  cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return host;
}

int local_gpu(const hvrun::Worker& w) {
  int count = 0;
  cudaGetDeviceCount(&count);
  return w.local_rank() < count ? w.local_rank() : 0;
}

hvrun::TensorView on(int gpu, void* data, DataType t, std::vector<int64_t> shape, cudaStream_t s) {
  return {data, t, std::move(shape), Device::cuda(gpu), s};
}

int collectives(hvrun::Worker& w) {
  const int gpu = local_gpu(w), size = w.size(), rank = w.rank();
  cudaSetDevice(gpu);
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);

  {  // A lone allreduce on the legacy default stream, Sum.
    std::vector<float> x(1001);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((rank + 1) * (i % 7));
    float* d = upload(x, nullptr);
    hvrun::Status st = w.allreduce("lone", on(gpu, d, DataType::kFloat32, {1001}, nullptr));
    auto got = download<float>(d, x.size(), nullptr);
    bool ok = st.is_ok();
    for (size_t i = 0; i < x.size() && ok; ++i) ok = got[i] == ranks_sum * static_cast<float>(i % 7);
    expect(ok, "allreduce float32 [1001] sum, default stream " + st.to_string());
    cudaFree(d);
  }
  {  // Five odd-sized tensors fused: Average with prescale 2 and postscale 0.5 (= the mean).
    std::vector<int64_t> sizes{1, 3, 17, 1000, 4097};
    std::vector<float*> devs;
    std::vector<hvrun::Handle> handles;
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<float> x(static_cast<size_t>(sizes[t]));
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rank * 4 + t + i % 5);
      devs.push_back(upload(x, s));
      handles.push_back(w.allreduce_async("fused." + std::to_string(t),
                                          on(gpu, devs.back(), DataType::kFloat32, {sizes[t]}, s),
                                          {.op = hvrun::ReduceOp::kAverage, .prescale = 2, .postscale = 0.5}));
    }
    bool ok = true;
    for (size_t t = 0; t < sizes.size(); ++t) {
      hvrun::Status st = w.wait(handles[t]);
      if (!st.is_ok()) std::printf("  %s\n", st.to_string().c_str());
      auto got = download<float>(devs[t], static_cast<size_t>(sizes[t]), s);
      ok = ok && st.is_ok();
      for (size_t i = 0; i < got.size() && ok; ++i) {
        float want = static_cast<float>(4.0 * (size - 1) / 2.0 + t + i % 5);
        ok = std::fabs(got[i] - want) < 1e-4f;
      }
      cudaFree(devs[t]);
    }
    expect(ok, "5 fused allreduces float32 average, prescale 2, postscale 0.5");
  }
  {  // float16 Sum, int32 Max and Min.
    std::vector<uint16_t> h(33, static_cast<uint16_t>(0x3C00));  // 1.0
    uint16_t* dh = upload(h, s);
    hvrun::Status st = w.allreduce("half", on(gpu, dh, DataType::kFloat16, {33}, s));
    auto got = download<uint16_t>(dh, h.size(), s);
    // size * 1.0 in binary16: exponent 15 + floor(log2(size)); exact for small sizes.
    float want = static_cast<float>(size);
    uint32_t bits;
    std::memcpy(&bits, &want, 4);
    uint16_t want16 = static_cast<uint16_t>(((bits >> 16) & 0x8000) | ((((bits >> 23) & 0xff) - 112) << 10) |
                                            ((bits >> 13) & 0x3ff));
    expect(st.is_ok() && std::all_of(got.begin(), got.end(), [&](uint16_t v) { return v == want16; }),
           "allreduce float16 [33] sum " + st.to_string());
    cudaFree(dh);
    std::vector<int32_t> v(9, rank * 10 - 5);
    int32_t* dmax = upload(v, s);
    int32_t* dmin = upload(v, s);
    hvrun::Status a = w.allreduce("imax", on(gpu, dmax, DataType::kInt32, {9}, s), {.op = hvrun::ReduceOp::kMax});
    hvrun::Status b = w.allreduce("imin", on(gpu, dmin, DataType::kInt32, {9}, s), {.op = hvrun::ReduceOp::kMin});
    auto gmax = download<int32_t>(dmax, 9, s), gmin = download<int32_t>(dmin, 9, s);
    expect(a.is_ok() && b.is_ok() && gmax[8] == (size - 1) * 10 - 5 && gmin[0] == -5, "allreduce int32 max and min");
    cudaFree(dmax);
    cudaFree(dmin);
  }
  {  // Allgather with uneven first dimension: rank r has r+1 rows of 3.
    std::vector<float> x(static_cast<size_t>(rank + 1) * 3);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rank * 100 + i);
    float* d = upload(x, s);
    hvrun::Handle h = w.allgather_async("gather", on(gpu, d, DataType::kFloat32, {rank + 1, 3}, s));
    hvrun::Status st = w.wait(h);
    hvrun::TensorView out = h.output();
    bool ok = st.is_ok() && out.device.is_cuda() && out.shape.size() == 2 &&
              out.shape[0] == size * (size + 1) / 2 && out.shape[1] == 3;
    if (ok) {
      auto got = download<float>(out.data, static_cast<size_t>(out.shape[0] * 3), s);
      size_t at = 0;
      for (int k = 0; k < size && ok; ++k)
        for (size_t i = 0; i < static_cast<size_t>(k + 1) * 3 && ok; ++i) ok = got[at++] == static_cast<float>(k * 100 + i);
    }
    expect(ok, "allgather float32 uneven rows " + st.to_string());
    cudaFree(d);
  }
  {  // Broadcast from rank 0.
    std::vector<double> x(257, rank == 0 ? 42.5 : -1.0);
    double* d = upload(x, s);
    hvrun::Status st = w.broadcast("bcast", on(gpu, d, DataType::kFloat64, {257}, s), 0);
    auto got = download<double>(d, x.size(), s);
    expect(st.is_ok() && std::all_of(got.begin(), got.end(), [](double v) { return v == 42.5; }),
           "broadcast float64 [257] from rank 0 " + st.to_string());
    cudaFree(d);
  }
  {  // Alltoall: k+1 rows of 2 go to rank k.
    std::vector<int64_t> splits;
    std::vector<float> x;
    for (int k = 0; k < size; ++k) {
      splits.push_back(k + 1);
      for (int row = 0; row <= k; ++row)
        for (int c = 0; c < 2; ++c) x.push_back(static_cast<float>(rank * 1000 + k * 10 + row));
    }
    float* d = upload(x, s);
    int64_t rows = static_cast<int64_t>(x.size() / 2);
    hvrun::Handle h = w.alltoall_async("a2a", on(gpu, d, DataType::kFloat32, {rows, 2}, s), splits);
    hvrun::Status st = w.wait(h);
    hvrun::TensorView out = h.output();
    bool ok = st.is_ok() && out.shape.size() == 2 && out.shape[0] == static_cast<int64_t>(size) * (rank + 1);
    if (ok) {
      auto got = download<float>(out.data, static_cast<size_t>(out.shape[0] * 2), s);
      size_t at = 0;
      for (int j = 0; j < size && ok; ++j)
        for (int row = 0; row <= rank && ok; ++row, at += 2) ok = got[at] == static_cast<float>(j * 1000 + rank * 10 + row);
    }
    expect(ok, "alltoall float32 with splits " + st.to_string());
    cudaFree(d);
  }
  {  // Reducescatter of 2*size+1 rows of 4: rank r gets its slice of the sum.
    const int64_t dim0 = 2 * size + 1;
    std::vector<float> x(static_cast<size_t>(dim0 * 4));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rank + i / 4);
    float* d = upload(x, s);
    // Plain, then scaled by 0.5 before and 4 after the sum (exactly twice the sum).
    for (double pre : {1.0, 0.5}) {
      const double post = pre == 1.0 ? 1.0 : 4.0;
      hvrun::Handle h = w.reducescatter_async(pre == 1.0 ? "rs" : "rs.scaled",
                                              on(gpu, d, DataType::kFloat32, {dim0, 4}, s),
                                              {hvrun::ReduceOp::kSum, pre, post});
      hvrun::Status st = w.wait(h);
      hvrun::TensorView out = h.output();
      const int64_t base = dim0 / size, extra = dim0 % size;
      const int64_t my_rows = base + (rank < extra ? 1 : 0), first = rank * base + std::min<int64_t>(rank, extra);
      bool ok = st.is_ok() && out.shape.size() == 2 && out.shape[0] == my_rows;
      if (ok) {
        auto got = download<float>(out.data, static_cast<size_t>(my_rows * 4), s);
        for (int64_t i = 0; i < my_rows * 4 && ok; ++i)
          ok = got[static_cast<size_t>(i)] ==
               static_cast<float>((size * (first + i / 4) + ranks_sum - size) * pre * post);
      }
      expect(ok, "reducescatter float32 [" + std::to_string(dim0) + ", 4] prescale " +
                     std::to_string(pre) + " " + st.to_string());
    }
    // NCCL has no 16-bit integer: an int16 reduction of a CUDA tensor is refused, saying so.
    hvrun::Handle refused = w.reducescatter_async("rs.int16", on(gpu, d, DataType::kInt16, {dim0, 4}, s));
    hvrun::Status refusal = w.wait(refused);
    expect(!refusal.is_ok() && refusal.message().find("int16") != std::string::npos,
           "int16 CUDA reducescatter refused: " + refusal.to_string());
    cudaFree(d);
  }
  expect(w.barrier().is_ok(), "barrier");
  cudaStreamDestroy(s);
  std::printf("gpu collectives: %s\n", failures == 0 ? "OK" : "FAILED");
  return failures == 0 ? 0 : 1;
}

// A collective held behind its caller's stream by a spinning kernel fails promptly: by
// w.abort() (by_timeout false) or by the op timeout (true; run with --op-timeout 8, which
// leaves NCCL's set-up in the warm-up time to finish).
int stuck_collective(hvrun::Worker& w, bool by_timeout) {
  const int gpu = local_gpu(w);
  cudaSetDevice(gpu);
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  int* flag = nullptr;
  int* flag_device = nullptr;
  if (!cuda_ok(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc") ||
      !cuda_ok(cudaHostGetDevicePointer(&flag_device, flag, 0), "cudaHostGetDevicePointer"))
    return 1;
  *flag = 0;
  std::vector<float> x(1024, 1.0f);
  float* d = upload(x, s);
  cuda_ok(cudaStreamSynchronize(s), "sync");
  // Set the communicator up first, so the abort below meets a running collective.
  expect(w.allreduce("warmup", on(gpu, d, DataType::kFloat32, {1024}, s)).is_ok(), "warm-up allreduce");
  cuda_ok(hvrun::gpu_test::launch_spin_until_set(flag_device, s), "spin kernel");
  hvrun::Handle h = w.allreduce_async("stuck", on(gpu, d, DataType::kFloat32, {1024}, s));
  hvrun::Status early = h.wait(std::chrono::milliseconds(500));
  expect(early.code() == hvrun::StatusCode::kDeadlineExceeded, "collective waits behind its stream: " + early.to_string());
  // Should the failure wait for the held stream, a safety valve releases it after 20 s (the
  // check below then fails with the measured time instead of hanging).
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread valve([&] {
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return done; })) *flag = 1;
  });
  const auto start = Clock::now();
  if (!by_timeout) w.abort("gpu abort test");
  hvrun::Status st = h.wait(std::chrono::seconds(25));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(m);
    done = true;
  }
  cv.notify_all();
  valve.join();
  *flag = 1;  // release the stream
  cudaStreamSynchronize(s);
  if (by_timeout) {
    expect(!st.is_ok() && st.message().find("op timeout") != std::string::npos,
           "stuck collective fails at the op timeout, naming it: " + st.to_string());
  } else {
    expect(st.code() == hvrun::StatusCode::kAborted && st.message().find("gpu abort test") != std::string::npos,
           "aborted collective fails with kAborted naming the reason: " + st.to_string());
  }
  const long long bound_ms = by_timeout ? 14000 : 10000;  // the op timeout (8 s) counts here
  expect(ms < bound_ms, std::string(by_timeout ? "timeout" : "abort") + " took " + std::to_string(ms) +
                            " ms (bound " + std::to_string(bound_ms) + ")");
  std::printf("%s path: %s in %lld ms\n", by_timeout ? "timeout" : "abort", failures == 0 ? "OK" : "FAILED",
              static_cast<long long>(ms));
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}

int no_gpu(hvrun::Worker& w) {
  // Never dereferenced: the data plane fails before it touches the tensor.
  auto* fake = reinterpret_cast<float*>(uintptr_t{0x1000});
  hvrun::Status st = w.allreduce("no.gpu", hvrun::TensorView{fake, DataType::kFloat32, {4}, Device::cuda(0)});
  std::printf("CUDA tensor without a GPU: %s\n", st.to_string().c_str());
  bool clear = !st.is_ok() && (st.message().find("no usable GPU") != std::string::npos ||
                               st.message().find("built without CUDA") != std::string::npos ||
                               st.message().find("libhvrun_cuda.so") != std::string::npos);
  expect(clear, "a CUDA tensor on a machine without a GPU fails with a clear message");
  // Refused at submission, before any GPU work: no ordinal; input and output on different devices.
  float host[4] = {};
  hvrun::Status no_ordinal = w.allreduce("no.ordinal", hvrun::TensorView{fake, DataType::kFloat32, {4}, Device::cuda(-1)});
  expect(no_ordinal.code() == hvrun::StatusCode::kInvalidArgument &&
             no_ordinal.message().find("without a device ordinal") != std::string::npos,
         "a CUDA tensor without an ordinal is refused: " + no_ordinal.to_string());
  hvrun::Status mixed = w.allreduce("mixed", hvrun::ConstTensorView{host, DataType::kFloat32, {4}},
                                    hvrun::TensorView{fake, DataType::kFloat32, {4}, Device::cuda(0)});
  expect(mixed.code() == hvrun::StatusCode::kInvalidArgument &&
             mixed.message().find("input on cpu but output on cuda:0") != std::string::npos,
         "input on the host and output on a GPU is refused: " + mixed.to_string());
  std::vector<std::string> names{"g.host", "g.gpu"};
  std::vector<hvrun::TensorView> group{{host, DataType::kFloat32, {4}},
                                       {fake, DataType::kFloat32, {4}, Device::cuda(0)}};
  auto handles = w.grouped_allreduce_async(names, group);
  hvrun::Status grouped = handles.at(0).wait(std::chrono::seconds(5));
  expect(grouped.code() == hvrun::StatusCode::kInvalidArgument &&
             grouped.message().find("a group's tensors share one device") != std::string::npos,
         "a group mixing host and GPU tensors is refused: " + grouped.to_string());
  return failures == 0 ? 0 : 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int bench(hvrun::Worker& w, int steps) {
  const int gpu = local_gpu(w);
  cudaSetDevice(gpu);
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  ncclComm_t raw = nullptr;
  if (w.size() == 1) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&raw, 1, id, 0) != ncclSuccess) raw = nullptr;
  }
  struct Shape { int tensors; size_t total_bytes; };
  const Shape shapes[] = {{1, 4}, {16, 1 << 20}, {64, 25 << 20}, {161, 100 << 20}};
  // On one rank an in-place ncclAllReduce moves nothing; out of place it is one device copy,
  // the least a step that leaves the caller's tensors in place can cost there.
  std::printf("\n%-9s %12s %14s %16s %18s %14s\n", "tensors", "fused bytes", "hvrun us/step",
              "raw in place us", "raw out of place us", "overhead us");
  for (const Shape& shape : shapes) {
    const size_t per = std::max<size_t>(shape.total_bytes / static_cast<size_t>(shape.tensors) / 4, 1);
    std::vector<float*> devs(static_cast<size_t>(shape.tensors));
    for (auto& d : devs) cuda_ok(cudaMalloc(&d, per * 4), "cudaMalloc");
    std::vector<double> hv;
    for (int step = 0; step < steps + 3; ++step) {
      auto t0 = Clock::now();
      std::vector<hvrun::Handle> hs;
      for (size_t t = 0; t < devs.size(); ++t)
        hs.push_back(w.allreduce_async("b" + std::to_string(shape.tensors) + "." + std::to_string(t),
                                       on(gpu, devs[t], DataType::kFloat32, {static_cast<int64_t>(per)}, s)));
      for (auto& h : hs)
        if (!w.wait(h).is_ok()) ++failures;
      auto t1 = Clock::now();
      if (step >= 3) hv.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    // Raw NCCL: one ncclAllReduce of the whole fused size, in place and out of place.
    std::vector<double> in_place, out_of_place;
    if (raw) {
      const size_t count = per * devs.size();
      float* whole = nullptr;
      float* other = nullptr;
      cuda_ok(cudaMalloc(&whole, count * 4), "cudaMalloc");
      cuda_ok(cudaMalloc(&other, count * 4), "cudaMalloc");
      for (int step = 0; step < steps + 3; ++step) {
        for (float* out : {whole, other}) {
          auto r0 = Clock::now();
          ncclAllReduce(whole, out, count, ncclFloat32, ncclSum, raw, s);
          cudaStreamSynchronize(s);
          if (step >= 3)
            (out == whole ? in_place : out_of_place)
                .push_back(std::chrono::duration<double, std::micro>(Clock::now() - r0).count());
        }
      }
      cudaFree(whole);
      cudaFree(other);
    }
    const double h = median(hv);
    if (raw) {
      const double inp = median(in_place), oop = median(out_of_place);
      std::printf("%-9d %12zu %14.1f %16.1f %18.1f %14.1f\n", shape.tensors, per * 4 * devs.size(), h,
                  inp, oop, h - oop);
    } else {
      std::printf("%-9d %12zu %14.1f %16s %18s %14s\n", shape.tensors, per * 4 * devs.size(), h,
                  "n/a", "n/a", "n/a");
    }
    for (auto& d : devs) cudaFree(d);
  }
  if (raw) ncclCommDestroy(raw);
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}

// The pack kernel with every transform, per dtype, against one cudaMemcpy D2D of the same bytes:
// the "% of D2D" column is what the kernels must keep at >= 90 from 1 MB up.
int kernels_bench() {
  using namespace hvrun::detail::cuda;
  if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice")) return 1;
  struct Transform {
    const char* name;
    SegmentTransform t;
    bool joined;  // every source null: the neutral fill
  };
  const Transform transforms[] = {
      {"copy", {}, false},
      {"prescale 0.5", {.scale = 0.5}, false},
      {"average/3 postscale 2", {.scale = 2.0, .divisor = 3}, false},
      {"scale 1/3 (double)", {.scale = 1.0 / 3.0}, false},
      {"neutral min (joined)", {.neutral_op = hvrun::ReduceOp::kMin}, true},
  };
  const DataType types[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                            DataType::kFloat64, DataType::kInt32, DataType::kInt64};
  std::printf("\n%-9s %-22s %12s %10s %10s %9s\n", "dtype", "pack (161 tensors)", "bytes", "us", "GB/s",
              "% of D2D");
  for (size_t total : {size_t{1} << 20, size_t{25} << 20, size_t{128} << 20}) {
    for (DataType dtype : types) {
      const size_t esize = hvrun::dtype_size(dtype);
      // ResNet-50-like: 161 tensors of uneven sizes, odd element counts.
      std::vector<uint64_t> counts;
      for (int t = 0; t < 161; ++t) counts.push_back((total / esize) * (t % 9 + 1) / (161 * 5) + 1 + t % 3);
      FusedLayout layout = fused_layout(counts, esize);
      unsigned char *src = nullptr, *fusion = nullptr;
      cuda_ok(cudaMalloc(&src, layout.total * esize + 64), "cudaMalloc");
      cuda_ok(cudaMalloc(&fusion, layout.total * esize + 64), "cudaMalloc");
      cuda_ok(cudaMemset(src, 0, layout.total * esize + 64), "cudaMemset");
      const uint64_t bytes = std::accumulate(counts.begin(), counts.end(), uint64_t{0}) * esize;
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      auto time = [&](auto&& op) {
        for (int i = 0; i < 3; ++i) op();
        cudaEventRecord(a);
        for (int i = 0; i < 20; ++i) op();
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        return ms * 1000.0 / 20;
      };
      const double memcpy_us = time([&] { cudaMemcpyAsync(fusion, src, bytes, cudaMemcpyDeviceToDevice, nullptr); });
      for (const Transform& tr : transforms) {
        std::vector<const void*> sources;
        for (size_t i = 0; i < counts.size(); ++i)
          sources.push_back(tr.joined ? nullptr : src + layout.offsets[i] * esize);
        auto chunks = split_segments(pack_segments(sources, counts, fusion, layout, esize), kChunkBytes / esize, esize);
        Segment* table = nullptr;
        cuda_ok(cudaMalloc(&table, chunks.size() * sizeof(Segment)), "cudaMalloc");
        cuda_ok(cudaMemcpy(table, chunks.data(), chunks.size() * sizeof(Segment), cudaMemcpyHostToDevice), "table");
        SegmentTransform t = tr.t;
        t.dtype = dtype;
        const double us = time([&] { launch_copy_segments(table, chunks.size(), t, nullptr); });
        std::printf("%-9s %-22s %12llu %10.1f %10.1f %9.0f\n", std::string(hvrun::dtype_name(dtype)).c_str(), tr.name,
                    static_cast<unsigned long long>(bytes), us, bytes / us / 1e3, 100.0 * memcpy_us / us);
        cudaFree(table);
      }
      std::printf("%-9s %-22s %12llu %10.1f %10.1f %9s\n", std::string(hvrun::dtype_name(dtype)).c_str(),
                  "cudaMemcpy D2D", static_cast<unsigned long long>(bytes), memcpy_us, bytes / memcpy_us / 1e3, "100");
      cuda_ok(cudaGetLastError(), "kernels");
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      cudaFree(src);
      cudaFree(fusion);
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "kernels-bench") return kernels_bench();
  if (mode != "collectives" && mode != "abort" && mode != "timeout" && mode != "no-gpu" && mode != "bench") {
    std::fprintf(stderr, "usage: hvrun_gpu_worker collectives|abort|timeout|no-gpu|bench [steps]|kernels-bench\n");
    return 2;
  }
  auto init = hvrun::Worker::init();
  if (!init.is_ok()) {
    std::fprintf(stderr, "hvrun init failed: %s\n", init.status().to_string().c_str());
    return 1;
  }
  hvrun::Worker& w = **init;
  int rc = 0;
  if (mode == "collectives") rc = collectives(w);
  else if (mode == "abort") rc = stuck_collective(w, false);
  else if (mode == "timeout") rc = stuck_collective(w, true);
  else if (mode == "no-gpu") rc = no_gpu(w);
  else rc = bench(w, argc > 2 ? std::atoi(argv[2]) : 20);
  std::fflush(stdout);
  if (mode != "abort") (void)w.shutdown();
  return rc;
}
