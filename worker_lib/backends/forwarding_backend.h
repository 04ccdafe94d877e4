// A data plane that wraps another and hands it every call: the base of the planes that add
// something around one (the cross-host rounds' owner, the sparse Gloo plane), which override only
// what they change.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "worker_lib/backend.h"

namespace hvrun::detail {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    return inner_->allreduce(buffer, count, dtype, op);
  }
  Status allreduce_pieces(std::span<const ReducePiece> pieces, DataType dtype, ReduceOp op,
                          const ReduceScaling& scaling, std::vector<std::byte>& staging,
                          PiecePhases* phases) override {
    return inner_->allreduce_pieces(pieces, dtype, op, scaling, staging, phases);
  }
  Status allgatherv(const void* input, void* output, std::span<const size_t> recv_bytes) override {
    return inner_->allgatherv(input, output, recv_bytes);
  }
  Status broadcast(void* buffer, size_t bytes, int root) override {
    return inner_->broadcast(buffer, bytes, root);
  }
  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override {
    return inner_->alltoallv(input, send_bytes, output, recv_bytes);
  }
  Status barrier() override { return inner_->barrier(); }
  void abort(const std::string& reason) override { inner_->abort(reason); }

 private:
  std::unique_ptr<Backend> inner_;
};

}  // namespace hvrun::detail
