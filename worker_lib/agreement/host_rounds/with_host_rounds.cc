#include "worker_lib/agreement/host_rounds/with_host_rounds.h"

#include "worker_lib/backends/forwarding_backend.h"

namespace hvrun::detail {
namespace {

class WithHostRounds final : public ForwardingBackend {
 public:
  WithHostRounds(std::unique_ptr<Backend> plane, std::unique_ptr<agreement::HostRounds> rounds,
                 std::unique_ptr<agreement::RoundArbiter> arbiter)
      : ForwardingBackend(std::move(plane)),
        rounds_(std::move(rounds)),
        arbiter_(std::move(arbiter)) {}

  void abort(const std::string& reason) override {
    rounds_->abort();
    ForwardingBackend::abort(reason);
  }

 private:
  // Destroyed before the base's plane, arbiter first: the arbiter, then the rounds, then the
  // plane.
  std::unique_ptr<agreement::HostRounds> rounds_;
  std::unique_ptr<agreement::RoundArbiter> arbiter_;
};

}  // namespace

std::unique_ptr<Backend> with_host_rounds(std::unique_ptr<Backend> plane,
                                          std::unique_ptr<agreement::HostRounds> rounds,
                                          std::unique_ptr<agreement::RoundArbiter> arbiter) {
  return std::make_unique<WithHostRounds>(std::move(plane), std::move(rounds), std::move(arbiter));
}

}  // namespace hvrun::detail
