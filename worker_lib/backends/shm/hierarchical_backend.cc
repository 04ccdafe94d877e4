#include "worker_lib/backends/shm/hierarchical_backend.h"

#include <cstdint>
#include <vector>

#include "worker_lib/half.h"

namespace hvrun::detail {
namespace {

class HierarchicalBackend final : public Backend {
 public:
  explicit HierarchicalBackend(HierarchicalParts parts) : parts_(std::move(parts)) {}

  std::string name() const override { return "hierarchical(shm+gloo)"; }
  int rank() const override { return parts_.rank; }
  int size() const override { return parts_.size; }

  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    if (count == 0) return Status::ok();
    if (dtype == DataType::kFloat16 || dtype == DataType::kBFloat16) {
      auto* data = static_cast<uint16_t*>(buffer);
      const bool bf16 = dtype == DataType::kBFloat16;
      widened_.resize(count);
      for (size_t i = 0; i < count; ++i)
        widened_[i] = bf16 ? bfloat16_to_float(data[i]) : float16_to_float(data[i]);
      HVRUN_RETURN_IF_ERROR(reduce_in_stages(widened_.data(), count, DataType::kFloat32, op));
      for (size_t i = 0; i < count; ++i)
        data[i] = bf16 ? float_to_bfloat16(widened_[i]) : float_to_float16(widened_[i]);
      return Status::ok();
    }
    return reduce_in_stages(buffer, count, dtype, op);
  }

  Status allgatherv(const void* input, void* output, std::span<const size_t> recv_bytes) override {
    return parts_.world->allgatherv(input, output, recv_bytes);
  }
  Status broadcast(void* buffer, size_t bytes, int root) override {
    return parts_.world->broadcast(buffer, bytes, root);
  }
  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override {
    return parts_.world->alltoallv(input, send_bytes, output, recv_bytes);
  }
  Status barrier() override { return parts_.world->barrier(); }

  void abort(const std::string& reason) override {
    if (parts_.rounds) parts_.rounds->abort();
    parts_.host->abort(reason);
    if (parts_.leaders) parts_.leaders->abort(reason);
    parts_.world->abort(reason);
  }

 private:
  Status reduce_in_stages(void* buffer, size_t count, DataType dtype, ReduceOp op) {
    HVRUN_RETURN_IF_ERROR(parts_.host->allreduce(buffer, count, dtype, op));
    if (parts_.leaders) HVRUN_RETURN_IF_ERROR(parts_.leaders->allreduce(buffer, count, dtype, op));
    return parts_.host->broadcast(buffer, count * dtype_size(dtype), 0);
  }

  HierarchicalParts parts_;
  std::vector<float> widened_;  // reused across calls (float16/bfloat16 accumulation)
};

}  // namespace

std::unique_ptr<Backend> make_hierarchical_backend(HierarchicalParts parts) {
  return std::make_unique<HierarchicalBackend>(std::move(parts));
}

}  // namespace hvrun::detail
