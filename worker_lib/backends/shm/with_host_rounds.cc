#include "worker_lib/backends/shm/with_host_rounds.h"

namespace hvrun::detail {
namespace {

class WithHostRounds final : public Backend {
 public:
  WithHostRounds(std::unique_ptr<Backend> plane, std::unique_ptr<shm::HostRounds> rounds,
                 std::unique_ptr<shm::RoundArbiter> arbiter)
      : plane_(std::move(plane)), rounds_(std::move(rounds)), arbiter_(std::move(arbiter)) {}

  std::string name() const override { return plane_->name(); }
  int rank() const override { return plane_->rank(); }
  int size() const override { return plane_->size(); }
  Status allreduce(void* buffer, size_t count, DataType dtype, ReduceOp op) override {
    return plane_->allreduce(buffer, count, dtype, op);
  }
  Status allreduce_pieces(std::span<const ReducePiece> pieces, DataType dtype, ReduceOp op,
                          const ReduceScaling& scaling, std::vector<std::byte>& staging,
                          PiecePhases* phases) override {
    return plane_->allreduce_pieces(pieces, dtype, op, scaling, staging, phases);
  }
  Status allgatherv(const void* input, void* output, std::span<const size_t> recv_bytes) override {
    return plane_->allgatherv(input, output, recv_bytes);
  }
  Status broadcast(void* buffer, size_t bytes, int root) override {
    return plane_->broadcast(buffer, bytes, root);
  }
  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override {
    return plane_->alltoallv(input, send_bytes, output, recv_bytes);
  }
  Status barrier() override { return plane_->barrier(); }
  void abort(const std::string& reason) override {
    rounds_->abort();
    plane_->abort(reason);
  }

 private:
  std::unique_ptr<Backend> plane_;
  // Destroyed first (reverse order): the arbiter, then the rounds, then the plane.
  std::unique_ptr<shm::HostRounds> rounds_;
  std::unique_ptr<shm::RoundArbiter> arbiter_;
};

}  // namespace

std::unique_ptr<Backend> with_host_rounds(std::unique_ptr<Backend> plane,
                                          std::unique_ptr<shm::HostRounds> rounds,
                                          std::unique_ptr<shm::RoundArbiter> arbiter) {
  return std::make_unique<WithHostRounds>(std::move(plane), std::move(rounds), std::move(arbiter));
}

}  // namespace hvrun::detail
