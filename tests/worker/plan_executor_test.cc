// PlanExecutor in-process: threads act as ranks and execute hand-written coordinator Responses
// (the shapes the contract prescribes) over real Gloo backends. Covers fused allreduce with
// prescale/postscale and a joined rank, fused allgather, reducescatter's uneven split, alltoall
// from a splits matrix, error-free barrier/join, and reuse of the fusion buffer.
#include <gtest/gtest.h>

#include "tests/support/in_process_ranks.h"
#include "tests/worker/plan_entries.h"
#include "worker_lib/execution/plan_executor.h"

namespace hvrun::detail {
namespace {

using plan_entries::add_tensor;
using plan_entries::op;

TEST(PlanExecutor, FusedAllreduceWithJoinedRankAndScaling) {
  const int size = 3;
  run_ranks(size, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), size);
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
    r.set_dtype(v1::DATA_TYPE_FLOAT32);
    r.set_reduce_op(v1::REDUCE_OP_AVERAGE);
    r.set_prescale(2.0);
    r.set_postscale(0.5);
    r.add_joined_ranks(2);
    r.set_contributing_ranks(2);
    add_tensor(r, "a", {4});
    add_tensor(r, "b", {2, 3});
    bool joined = b.rank() == 2;
    std::vector<float> a(4, b.rank() + 1.0f), bb(6, 10.0f * (b.rank() + 1)), out_a(4);
    std::vector<std::shared_ptr<PendingOp>> entries;
    if (joined) {
      entries = {nullptr, nullptr};
    } else {
      entries = {op("a", {4}, DataType::kFloat32, a.data(), out_a.data()),
                 op("b", {2, 3}, DataType::kFloat32, bb.data(), bb.data())};
    }
    for (int round = 0; round < 3; ++round) {  // the fusion buffer is reused
      if (!joined) {
        std::fill(out_a.begin(), out_a.end(), 0.0f);
        std::fill(bb.begin(), bb.end(), 10.0f * (b.rank() + 1));
        for (auto& e : entries) e->handle = std::make_shared<HandleState>(e->handle->name);
      }
      size_t capacity = ex.buffer_capacity();
      ex.execute(r, entries);
      if (round > 0) {
        EXPECT_EQ(ex.buffer_capacity(), capacity);
      }
      if (joined) continue;
      for (auto& e : entries) ASSERT_TRUE(e->handle->status.is_ok()) << e->handle->status.to_string();
      // (1 + 2) * 2 / 2 contributors * 0.5 = 1.5 ; (10 + 20) * 2 / 2 * 0.5 = 15
      EXPECT_FLOAT_EQ(out_a[3], 1.5f);
      EXPECT_FLOAT_EQ(bb[5], 15.0f);
      EXPECT_FLOAT_EQ(a[0], b.rank() + 1.0f);  // out of place: input untouched
    }
  });
}

TEST(PlanExecutor, FusedAllgatherWithDifferentFirstDims) {
  const int size = 3;
  run_ranks(size, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), size);
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_ALLGATHER);
    r.set_dtype(v1::DATA_TYPE_INT32);
    // Tensor x: rank k has k rows of 2; tensor y: rank k has 1 row of 3.
    auto* x = r.add_tensors();
    x->set_name("x");
    auto* y = r.add_tensors();
    y->set_name("y");
    for (int k = 0; k < size; ++k) x->add_first_dims(k), y->add_first_dims(1);
    x->add_shape(0), x->add_shape(2);
    y->add_shape(1), y->add_shape(3);
    std::vector<int32_t> xv(static_cast<size_t>(b.rank()) * 2 + 1, b.rank()), yv(3, 100 + b.rank());
    auto ex_x = op("x", {b.rank(), 2}, DataType::kInt32, xv.data(), nullptr);
    auto ex_y = op("y", {1, 3}, DataType::kInt32, yv.data(), nullptr);
    ex.execute(r, {ex_x, ex_y});
    ASSERT_TRUE(ex_x->handle->status.is_ok()) << ex_x->handle->status.to_string();
    EXPECT_EQ(ex_x->handle->output.shape, (std::vector<int64_t>{3, 2}));
    auto* xo = reinterpret_cast<const int32_t*>(ex_x->handle->output.bytes.data());
    EXPECT_EQ((std::vector<int32_t>(xo, xo + 6)), (std::vector<int32_t>{1, 1, 2, 2, 2, 2}));
    EXPECT_EQ(ex_y->handle->output.shape, (std::vector<int64_t>{3, 3}));
    auto* yo = reinterpret_cast<const int32_t*>(ex_y->handle->output.bytes.data());
    EXPECT_EQ(yo[0], 100);
    EXPECT_EQ(yo[8], 102);
  });
}

TEST(PlanExecutor, ReducescatterSplitsRowsUnevenly) {
  const int size = 3;
  run_ranks(size, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), size);
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_REDUCESCATTER);
    r.set_dtype(v1::DATA_TYPE_INT64);
    r.set_reduce_op(v1::REDUCE_OP_SUM);
    add_tensor(r, "rs", {5, 2});
    std::vector<int64_t> in(10);
    for (int i = 0; i < 10; ++i) in[i] = i;
    auto e = op("rs", {5, 2}, DataType::kInt64, in.data(), nullptr);
    ex.execute(r, {e});
    ASSERT_TRUE(e->handle->status.is_ok());
    // 5 rows over 3 ranks: 2, 2, 1 rows starting at rows 0, 2, 4.
    int64_t rows = b.rank() < 2 ? 2 : 1, first = b.rank() * 2;
    EXPECT_EQ(e->handle->output.shape, (std::vector<int64_t>{rows, 2}));
    auto* o = reinterpret_cast<const int64_t*>(e->handle->output.bytes.data());
    EXPECT_EQ(o[0], 3 * first * 2);
  });
}

TEST(PlanExecutor, AlltoallFollowsTheSplitsMatrix) {
  const int size = 2;
  run_ranks(size, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), size);
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_ALLTOALL);
    r.set_dtype(v1::DATA_TYPE_UINT8);
    auto* t = r.add_tensors();
    t->set_name("a2a");
    // rank 0 sends 1 row to 0 and 2 rows to 1; rank 1 sends 0 rows to 0 and 1 row to 1.
    for (int64_t v : {1, 2, 0, 1}) t->add_splits_matrix(v);
    std::vector<uint8_t> in = b.rank() == 0 ? std::vector<uint8_t>{10, 11, 12} : std::vector<uint8_t>{20};
    auto e = op("a2a", {static_cast<int64_t>(in.size())}, DataType::kUInt8, in.data(), nullptr);
    ex.execute(r, {e});
    ASSERT_TRUE(e->handle->status.is_ok()) << e->handle->status.to_string();
    std::vector<uint8_t> got(e->handle->output.bytes.size());
    std::memcpy(got.data(), e->handle->output.bytes.data(), got.size());
    if (b.rank() == 0) {
      EXPECT_EQ(got, (std::vector<uint8_t>{10}));
      EXPECT_EQ(e->handle->received_splits, (std::vector<int64_t>{1, 0}));
    } else {
      EXPECT_EQ(got, (std::vector<uint8_t>{11, 12, 20}));
      EXPECT_EQ(e->handle->received_splits, (std::vector<int64_t>{2, 1}));
    }
  });
}

}  // namespace
}  // namespace hvrun::detail
