// How ready tensors are packed into fused responses (step 4 of the negotiation protocol,
// coordinator/engine/negotiation_engine.h). Pure: the coordinator's plan builder and the worker's
// agreed rounds of cached submissions (worker_lib/agreement/cached_rounds.h) both place tensors
// with it, so a set of tensors fuses alike whichever of them plans it.
#pragma once

#include <cstdint>
#include <vector>

#include "hvrun.pb.h"

namespace hvrun {

// Allreduces (and allgathers) with an equal key may share one fused response.
struct FusionKey {
  v1::CollectiveOp op;
  v1::DataType dtype;
  v1::DeviceKind device;
  v1::ReduceOp reduce_op;
  double prescale;  // as negotiated: 1 when the request left it unset (0)
  double postscale;
  friend bool operator==(const FusionKey&, const FusionKey&) = default;
};

// Places tensors, in plan order, into responses: a tensor joins the open response of its
// fusion key while that stays within the threshold; otherwise (and always with threshold 0 =
// no fusion) it opens a response of its own, which becomes its key's open one.
class FusionPacker {
 public:
  explicit FusionPacker(int64_t threshold_bytes) : threshold_(threshold_bytes) {}

  // The response a tensor of `bytes` and fusion key index `key` joins, or -1: open a new one
  // and say so with opened().
  int place(int key, int64_t bytes) {
    grow(key);
    const auto k = static_cast<size_t>(key);
    if (threshold_ <= 0 || open_[k] < 0 || bytes_[k] + bytes > threshold_) return -1;
    bytes_[k] += bytes;
    return open_[k];
  }
  // Response `response` was opened for a tensor of `bytes` with key index `key`.
  void opened(int key, int response, int64_t bytes) {
    grow(key);
    open_[static_cast<size_t>(key)] = response;
    bytes_[static_cast<size_t>(key)] = bytes;
  }

 private:
  void grow(int key) {
    if (static_cast<size_t>(key) >= open_.size()) {
      open_.resize(static_cast<size_t>(key) + 1, -1);
      bytes_.resize(static_cast<size_t>(key) + 1, 0);
    }
  }

  int64_t threshold_;
  std::vector<int> open_;       // per key: the response still filling, -1 = none
  std::vector<int64_t> bytes_;  // per key: its bytes so far
};

}  // namespace hvrun
