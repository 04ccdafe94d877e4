// Simulated ranks driving the pure NegotiationEngine (no gRPC): request builders and a harness
// that collects every plan.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/engine/negotiation_engine.h"

namespace hvrun::coordinator::testing {

using Clock = NegotiationEngine::Clock;
using TimePoint = NegotiationEngine::TimePoint;

inline v1::TensorRequest request(const std::string& name, v1::CollectiveOp op,
                                 std::vector<int64_t> shape,
                                 v1::DataType dtype = v1::DATA_TYPE_FLOAT32) {
  v1::TensorRequest r;
  r.set_name(name);
  r.set_op(op);
  r.set_dtype(dtype);
  r.set_device(v1::DEVICE_KIND_CPU);
  for (int64_t d : shape) r.add_shape(d);
  if (op == v1::COLLECTIVE_OP_ALLREDUCE || op == v1::COLLECTIVE_OP_REDUCESCATTER) {
    r.set_reduce_op(v1::REDUCE_OP_SUM);
  }
  return r;
}

inline v1::TensorRequest allreduce(const std::string& name, std::vector<int64_t> shape,
                                   v1::DataType dtype = v1::DATA_TYPE_FLOAT32) {
  return request(name, v1::COLLECTIVE_OP_ALLREDUCE, std::move(shape), dtype);
}

inline v1::TensorRequest cached(uint32_t id) {
  v1::TensorRequest r;
  r.set_cache_id(id);
  return r;
}

inline v1::TensorRequest join_request() {
  v1::TensorRequest r;
  r.set_name("join");
  r.set_op(v1::COLLECTIVE_OP_JOIN);
  return r;
}

inline v1::RequestBatch batch_of(std::vector<v1::TensorRequest> requests) {
  v1::RequestBatch batch;
  for (auto& r : requests) *batch.add_requests() = std::move(r);
  return batch;
}

// An engine plus the time it lives at; `submit` feeds one rank and collects any plan.
class Sim {
 public:
  explicit Sim(EngineOptions options) : engine(options) {}
  Sim(int world_size, int64_t fusion_threshold_bytes = 64 << 20,
      std::chrono::microseconds cycle_time = std::chrono::microseconds(1000),
      int cache_capacity = 1024)
      : engine(EngineOptions{world_size, fusion_threshold_bytes, cycle_time, cache_capacity}) {}

  void submit(int rank, std::vector<v1::TensorRequest> requests) {
    Status status = engine.submit(rank, batch_of(std::move(requests)), now);
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    collect();
  }
  void advance(std::chrono::microseconds by) {
    now += by;
    collect();
  }
  void collect() {
    while (auto plan = engine.take_plan(now)) plans.push_back(std::move(*plan));
  }
  // Every response of every plan so far, in order.
  std::vector<v1::Response> responses() const {
    std::vector<v1::Response> all;
    for (const auto& plan : plans) {
      for (const auto& response : plan.responses()) all.push_back(response);
    }
    return all;
  }

  NegotiationEngine engine;
  TimePoint now = TimePoint() + std::chrono::hours(1);
  std::vector<v1::Plan> plans;
};

}  // namespace hvrun::coordinator::testing
