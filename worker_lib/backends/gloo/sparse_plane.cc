#include "worker_lib/backends/gloo/sparse_plane.h"

#include <string>

namespace hvrun::detail {
namespace {

class SparseGlooPlane final : public Backend {
 public:
  SparseGlooPlane(std::unique_ptr<Backend> sparse, LazyMesh::Connect connect_full)
      : sparse_(std::move(sparse)),
        full_(std::move(connect_full),
              "gloo data plane: connecting the Gloo mesh of every rank (" +
                  std::to_string(sparse_->size()) +
                  " ranks) for its first allgather or alltoall") {}

  std::string name() const override { return sparse_->name(); }
  int rank() const override { return sparse_->rank(); }
  int size() const override { return sparse_->size(); }

  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    return sparse_->allreduce(buffer, count, dtype, op);
  }
  Status allreduce_pieces(std::span<const ReducePiece> pieces, DataType dtype, ReduceOp op,
                          const ReduceScaling& scaling, std::vector<std::byte>& staging,
                          PiecePhases* phases) override {
    return sparse_->allreduce_pieces(pieces, dtype, op, scaling, staging, phases);
  }
  Status broadcast(void* buffer, size_t bytes, int root) override {
    return sparse_->broadcast(buffer, bytes, root);
  }
  Status barrier() override { return sparse_->barrier(); }
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
    sparse_->abort(reason);
    full_.abort(reason);
  }

 private:
  std::unique_ptr<Backend> sparse_;
  LazyMesh full_;
};

}  // namespace

std::unique_ptr<Backend> make_sparse_gloo_plane(std::unique_ptr<Backend> sparse,
                                                LazyMesh::Connect connect_full) {
  return std::make_unique<SparseGlooPlane>(std::move(sparse), std::move(connect_full));
}

}  // namespace hvrun::detail
