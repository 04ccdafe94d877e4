#include "worker_lib/backends/gloo/sparse_plane.h"

#include <string>

#include "worker_lib/backends/forwarding_backend.h"

namespace hvrun::detail {
namespace {

// Everything on the sparse mesh but what needs every pair.
class SparseGlooPlane final : public ForwardingBackend {
 public:
  SparseGlooPlane(std::unique_ptr<Backend> sparse, LazyMesh::Connect connect_full)
      : ForwardingBackend(std::move(sparse)),
        full_(std::move(connect_full),
              "gloo data plane: connecting the Gloo mesh of every rank (" +
                  std::to_string(size()) + " ranks) for its first allgather or alltoall") {}

  Status allgatherv(const void* input, void* output, std::span<const size_t> recv_bytes) override {
    HVRUN_ASSIGN_OR_RETURN(Backend * mesh, full_.get());
    return mesh->allgatherv(input, output, recv_bytes);
  }
  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override {
    HVRUN_ASSIGN_OR_RETURN(Backend * mesh, full_.get());
    return mesh->alltoallv(input, send_bytes, output, recv_bytes);
  }
  void abort(const std::string& reason) override {
    ForwardingBackend::abort(reason);
    full_.abort(reason);
  }

 private:
  LazyMesh full_;
};

}  // namespace

std::unique_ptr<Backend> make_sparse_gloo_plane(std::unique_ptr<Backend> sparse,
                                                LazyMesh::Connect connect_full) {
  return std::make_unique<SparseGlooPlane>(std::move(sparse), std::move(connect_full));
}

}  // namespace hvrun::detail
