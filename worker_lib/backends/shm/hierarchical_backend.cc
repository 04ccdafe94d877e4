#include "worker_lib/backends/shm/hierarchical_backend.h"

#include <cstdint>
#include <string>
#include <vector>

#include "worker_lib/backends/gloo/lazy_mesh.h"
#include "worker_lib/half.h"

namespace hvrun::detail {
namespace {

class HierarchicalBackend final : public Backend {
 public:
  explicit HierarchicalBackend(HierarchicalParts parts)
      : parts_(std::move(parts)),
        world_(parts_.connect_world,
               "hierarchical data plane: connecting the Gloo mesh of every rank (" +
                   std::to_string(parts_.size) + " ranks) for its first allgather or alltoall") {}

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
    HVRUN_ASSIGN_OR_RETURN(Backend * mesh, world_.get());
    return mesh->allgatherv(input, output, recv_bytes);
  }
  // The root's host gets it on its shm, its leader gives it to the other leaders, and they to
  // their hosts.
  Status broadcast(void* buffer, size_t bytes, int root) override {
    if (bytes == 0) return Status::ok();
    const auto r = static_cast<size_t>(root);
    const int root_host = parts_.host_of[r];
    const bool on_root_host = parts_.host_of[static_cast<size_t>(parts_.rank)] == root_host;
    if (on_root_host)
      HVRUN_RETURN_IF_ERROR(parts_.host->broadcast(buffer, bytes, parts_.position_of[r]));
    if (parts_.leaders) HVRUN_RETURN_IF_ERROR(parts_.leaders->broadcast(buffer, bytes, root_host));
    if (!on_root_host) HVRUN_RETURN_IF_ERROR(parts_.host->broadcast(buffer, bytes, 0));
    return Status::ok();
  }
  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override {
    HVRUN_ASSIGN_OR_RETURN(Backend * mesh, world_.get());
    return mesh->alltoallv(input, send_bytes, output, recv_bytes);
  }
  // Every rank of a host has arrived, then every host's leader, then the host hears it.
  Status barrier() override {
    HVRUN_RETURN_IF_ERROR(parts_.host->barrier());
    if (parts_.leaders) HVRUN_RETURN_IF_ERROR(parts_.leaders->barrier());
    return parts_.host->barrier();
  }

  void abort(const std::string& reason) override {
    parts_.host->abort(reason);
    if (parts_.leaders) parts_.leaders->abort(reason);
    world_.abort(reason);
  }

 private:
  Status reduce_in_stages(void* buffer, size_t count, DataType dtype, ReduceOp op) {
    HVRUN_RETURN_IF_ERROR(parts_.host->allreduce(buffer, count, dtype, op));
    if (parts_.leaders) HVRUN_RETURN_IF_ERROR(parts_.leaders->allreduce(buffer, count, dtype, op));
    return parts_.host->broadcast(buffer, count * dtype_size(dtype), 0);
  }

  HierarchicalParts parts_;
  LazyMesh world_;  // every rank's mesh, for allgatherv and alltoallv
  std::vector<float> widened_;  // reused across calls (float16/bfloat16 accumulation)
};

}  // namespace

std::unique_ptr<Backend> make_hierarchical_backend(HierarchicalParts parts) {
  return std::make_unique<HierarchicalBackend>(std::move(parts));
}

}  // namespace hvrun::detail
