// --device cuda: device copies of train's tensors, moved on one CUDA stream that is also the
// stream handed to hvrun, so uploads, the collective and downloads are ordered without any
// host synchronisation until finish().
#include <cuda_runtime_api.h>

#include <cstdio>
#include <map>
#include <vector>

#include "staging.h"

namespace train {
namespace {

class CudaStaging final : public Staging {
 public:
  CudaStaging(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {}
  ~CudaStaging() override {
    for (auto& [key, buffer] : buffers_) cudaFree(buffer.data);
    cudaStreamDestroy(stream_);
  }

  hvrun::TensorView stage(const std::string& key, const hvrun::TensorView& host) override {
    Buffer& b = buffers_[key];
    if (b.bytes < host.bytes()) {
      cudaFree(b.data);
      b.data = nullptr;
      if (!ok(cudaMalloc(&b.data, host.bytes()), "cudaMalloc")) return {};
      b.bytes = host.bytes();
    }
    ok(cudaMemcpyAsync(b.data, host.data, host.bytes(), cudaMemcpyHostToDevice, stream_), "upload");
    pending_.push_back({host.data, b.data, host.bytes()});
    return {b.data, host.dtype, host.shape, hvrun::Device::cuda(ordinal_), stream_};
  }

  bool finish() override {
    bool good = true;
    for (const Pending& p : pending_)
      good = ok(cudaMemcpyAsync(p.host, p.device, p.bytes, cudaMemcpyDeviceToHost, stream_), "download") && good;
    pending_.clear();
    return ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize") && good;
  }

  std::string describe() const override {
    cudaDeviceProp props{};
    cudaGetDeviceProperties(&props, ordinal_);
    return "cuda:" + std::to_string(ordinal_) + " (" + props.name + ")";
  }

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  struct Pending {
    void* host;
    const void* device;
    size_t bytes;
  };
  static bool ok(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    std::fprintf(stderr, "train: CUDA %s failed: %s\n", what, cudaGetErrorString(e));
    return false;
  }

  int ordinal_;
  cudaStream_t stream_;
  std::map<std::string, Buffer> buffers_;
  std::vector<Pending> pending_;
};

}  // namespace

std::unique_ptr<Staging> make_cuda_staging(int local_rank, std::string& error) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    error = std::string("no usable GPU (") + (e != cudaSuccess ? cudaGetErrorString(e) : "no device") + ")";
    return nullptr;
  }
  // hvrun's rule: local rank k uses GPU k; one visible GPU (visible-devices pinning): that one.
  int ordinal = local_rank < count ? local_rank : (count == 1 ? 0 : -1);
  if (ordinal < 0) {
    error = "local rank " + std::to_string(local_rank) + " but only " + std::to_string(count) + " GPUs";
    return nullptr;
  }
  cudaStream_t stream = nullptr;
  if (cudaSetDevice(ordinal) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    error = "cannot use GPU " + std::to_string(ordinal) + ": " + cudaGetErrorString(cudaGetLastError());
    return nullptr;
  }
  return std::make_unique<CudaStaging>(ordinal, stream);
}

}  // namespace train
