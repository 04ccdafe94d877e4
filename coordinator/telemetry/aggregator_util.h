// Small helpers shared by the aggregator's files (aggregator.cc, aggregator_negotiation.cc).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "hvrun.pb.h"
#include "proto/collective_op_name.h"

namespace hvrun::coordinator::telemetry::detail {

inline const char* op_text(v1::CollectiveOp op) { return collective_op_name(op); }

inline uint64_t dtype_bytes(v1::DataType dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_UINT8:
    case v1::DATA_TYPE_INT8: return 1;
    case v1::DATA_TYPE_INT16:
    case v1::DATA_TYPE_FLOAT16:
    case v1::DATA_TYPE_BFLOAT16: return 2;
    case v1::DATA_TYPE_INT32:
    case v1::DATA_TYPE_FLOAT32: return 4;
    default: return 8;
  }
}

inline uint64_t tensor_bytes(const v1::Response& r, const v1::ResponseTensor& t) {
  uint64_t elements = 1;
  for (int64_t d : t.shape()) elements *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return elements * dtype_bytes(r.dtype());
}

inline double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Wall time covered by intervals, overlaps counted once: a rank waits for the tensors of one
// step at the same time, and their sum could exceed the step (and the job). Intervals come
// in the order their plans were sent, so each one adds what lies past the latest end so far
// (an interval that ends earlier adds nothing: never more than the wall time).
class CoveredTime {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Seconds [from, to) adds to what earlier intervals covered.
  double add(TimePoint from, TimePoint to) {
    if (to <= until_) return 0;
    const TimePoint start = std::max(from, until_);
    until_ = to;
    return start < to ? std::chrono::duration<double>(to - start).count() : 0;
  }

 private:
  TimePoint until_{};
};

inline std::string rank_list(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text;
}

}  // namespace hvrun::coordinator::telemetry::detail
