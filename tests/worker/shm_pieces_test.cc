// The fused allreduce straight from the tensors (Backend::allreduce_pieces) on the shm backend,
// in-process (threads act as ranks): mixed piece sizes with 0-size pieces, pieces spanning
// chunk boundaries and the latency path, in place and out of place, Average / prescale /
// postscale, every dtype (float16/bfloat16 accumulate in float32), a joined rank (null pieces),
// discarded results (null outputs), 2-4 ranks. Every result is checked against a reference
// computed in double, bitwise across ranks, and bitwise against the default implementation
// (allreduce_pieces_packed: pack, allreduce, unpack) on the same inputs. Then PlanExecutor on
// shm: a fused allreduce with a joined rank and an uneven reducescatter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "tests/support/in_process_ranks.h"
#include "tests/worker/plan_entries.h"
#include "tests/worker/tensor_values.h"
#include "worker_lib/backends/shm/shm_backend.h"
#include "worker_lib/backends/shm/shm_segment.h"
#include "worker_lib/execution/plan_executor.h"

namespace hvrun::detail {
namespace {

using test::close_enough;
using test::input_value;
using test::is_integer;
using test::kAllDtypes;
using test::load_value;
using test::store_value;

struct Scaling {
  double prescale, postscale;
};

struct Case {
  DataType dtype;
  ReduceOp op;
  Scaling scaling;
  std::vector<size_t> counts;  // one piece each
  bool joined_last;            // the last rank contributes nothing (null pieces)
};

// What one rank did in one case: its inputs (as doubles) and every piece's result bytes, from
// allreduce_pieces and from the packed default.
struct RankResult {
  std::vector<std::vector<double>> inputs;
  std::vector<std::vector<std::byte>> fused, packed;
};

double reference(const Case& c, const std::vector<RankResult>& ranks, size_t piece, size_t i,
                 int contributors) {
  double acc = 0;
  bool first = true;
  for (const RankResult& r : ranks) {
    if (r.inputs.empty()) continue;  // joined
    double v = r.inputs[piece][i] * c.scaling.prescale;
    if (first) acc = v, first = false;
    else if (c.op == ReduceOp::kMin) acc = std::min(acc, v);
    else if (c.op == ReduceOp::kMax) acc = std::max(acc, v);
    else if (c.op == ReduceOp::kProduct) acc *= v;
    else acc += v;
  }
  if (c.op == ReduceOp::kAverage)
    acc = is_integer(c.dtype) ? std::trunc(acc / contributors) : acc / contributors;
  acc *= c.scaling.postscale;
  return is_integer(c.dtype) ? std::trunc(acc) : acc;  // integer types scale, then truncate
}

// Runs every case on every rank: allreduce_pieces, then the packed default on the same inputs.
void run_cases(int size, size_t chunk_bytes, const std::vector<Case>& cases) {
  std::vector<std::vector<RankResult>> results(cases.size(), std::vector<RankResult>(size));
  std::mutex mutex;
  run_shm_ranks(size, {.chunk_bytes = chunk_bytes}, [&](Backend& b) {
    std::mt19937 rng(static_cast<unsigned>(b.rank() + 7));
    std::vector<std::byte> staging;
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& c = cases[ci];
      const bool joined = c.joined_last && b.rank() == size - 1;
      const int contributors = c.joined_last ? size - 1 : size;
      const size_t esize = dtype_size(c.dtype);
      RankResult mine;
      std::vector<std::vector<std::byte>> in(c.counts.size()), out(c.counts.size());
      std::vector<ReducePiece> pieces;
      for (size_t p = 0; p < c.counts.size(); ++p) {
        const size_t n = c.counts[p];
        in[p].resize(std::max<size_t>(1, n) * esize);
        std::vector<double> values(n);
        for (size_t i = 0; i < n; ++i) {
          store_value(in[p].data(), i, c.dtype, input_value(c.dtype, c.op, b.rank(), i + p, rng));
          values[i] = load_value(in[p].data(), i, c.dtype);
        }
        if (!joined) mine.inputs.push_back(std::move(values));
        const bool in_place = p % 2 == 0;
        if (!in_place) out[p].assign(std::max<size_t>(1, n) * esize, std::byte{0x5a});
        void* result = in_place ? in[p].data() : out[p].data();
        pieces.push_back(joined ? ReducePiece{nullptr, nullptr, n}
                                : ReducePiece{in[p].data(), result, n});
      }
      // Keep the inputs: the packed default runs on the same values afterwards.
      std::vector<std::vector<std::byte>> saved = in;
      const ReduceScaling scaling{.prescale = c.scaling.prescale,
                                  .postscale = c.scaling.postscale,
                                  .divisor = c.op == ReduceOp::kAverage ? contributors : 1};
      PiecePhases phases;
      Status s = b.allreduce_pieces(pieces, c.dtype, c.op, scaling, staging, &phases);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      auto result_bytes = [&](size_t p) {
        const auto* at = static_cast<const std::byte*>(pieces[p].output);
        return std::vector<std::byte>(at, at + c.counts[p] * esize);
      };
      if (!joined)
        for (size_t p = 0; p < pieces.size(); ++p) mine.fused.push_back(result_bytes(p));
      in = saved;
      for (size_t p = 0; p < pieces.size() && !joined; ++p) {
        pieces[p].input = in[p].data();
        if (p % 2 == 0) pieces[p].output = in[p].data();
      }
      s = allreduce_pieces_packed(b, pieces, c.dtype, c.op, scaling, staging, nullptr);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      if (!joined)
        for (size_t p = 0; p < pieces.size(); ++p) mine.packed.push_back(result_bytes(p));
      std::lock_guard<std::mutex> lock(mutex);
      results[ci][b.rank()] = std::move(mine);
    }
  });
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const auto& ranks = results[ci];
    const int contributors = c.joined_last ? size - 1 : size;
    const std::string what = "case " + std::to_string(ci) + " dtype " +
                             std::string(dtype_name(c.dtype)) + " op " +
                             std::string(reduce_op_name(c.op)) + " ranks " + std::to_string(size);
    for (size_t p = 0; p < c.counts.size(); ++p) {
      const auto& first = ranks[0].fused[p];
      for (int r = 0; r < contributors; ++r) {
        ASSERT_EQ(ranks[r].fused[p], first) << what << ": rank " << r << " differs, piece " << p;
        ASSERT_EQ(ranks[r].packed[p], first)
            << what << ": differs from the packed default on rank " << r << ", piece " << p;
      }
      for (size_t i = 0; i < c.counts[p]; ++i) {
        const double want = reference(c, ranks, p, i, contributors);
        const double got = load_value(first.data(), i, c.dtype);
        ASSERT_TRUE(close_enough(got, want, c.dtype))
            << what << " piece " << p << " [" << i << "]: got " << got << ", want " << want;
      }
    }
  }
}

std::vector<Case> cases_for(int size, const std::vector<std::vector<size_t>>& layouts) {
  std::vector<Case> cases;
  for (DataType t : kAllDtypes)
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                        ReduceOp::kProduct})
      for (const auto& counts : layouts) {
        cases.push_back({t, op, {1.0, 1.0}, counts, false});
        if (op == ReduceOp::kSum || op == ReduceOp::kAverage) {
          // Scaling that stays exact in the integer types too.
          cases.push_back({t, op, {2.0, 0.5}, counts, false});
          if (size > 1) cases.push_back({t, op, {1.0, 1.0}, counts, true});
        }
      }
  return cases;
}

class ShmPiecesTest : public ::testing::TestWithParam<int> {};

// 16 KiB slots: the larger layouts cross several chunks, with pieces spanning their boundaries
// and parts that start inside a piece (and, for the large pieces, alignment gaps the layout
// leaves between them); the small one takes the one-barrier latency path.
TEST_P(ShmPiecesTest, MixedPiecesEveryDtypeOpAndScalingMatchReferenceAndPackedDefault) {
  const std::vector<std::vector<size_t>> layouts = {
      {0, 3, 0, 5},                                   // latency path, 0-size pieces
      {1, 0, 7, 1001, 4099, 0, 6143, 13},             // several chunks, odd sizes
      {9000},                                         // one piece over several chunks
      {3, 20000, 5, 17000},  // >= 64 KiB pieces (4- and 8-byte types) start 4 KiB-aligned: gaps
  };
  run_cases(GetParam(), 16 << 10, cases_for(GetParam(), layouts));
}

TEST_P(ShmPiecesTest, EmptyAndAllZeroPiecesAreNoOps) {
  run_shm_ranks(GetParam(), {.chunk_bytes = 16 << 10}, [&](Backend& b) {
    std::vector<std::byte> staging;
    EXPECT_TRUE(b.allreduce_pieces({}, DataType::kFloat32, ReduceOp::kSum, {}, staging, nullptr)
                    .is_ok());
    std::vector<ReducePiece> zeros = {{nullptr, nullptr, 0}, {nullptr, nullptr, 0}};
    EXPECT_TRUE(b.allreduce_pieces(zeros, DataType::kFloat16, ReduceOp::kAverage, {}, staging,
                                   nullptr)
                    .is_ok());
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmPiecesTest, ::testing::Values(1, 2, 3, 4));

// PlanExecutor on the shm backend: what the runtime runs.
using plan_entries::add_tensor;
using plan_entries::op;

TEST(ShmPlanExecutor, FusedAverageWithJoinedRankAndScalingOverChunks) {
  const int size = 3;
  run_shm_ranks(size, {.chunk_bytes = 4096}, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), size);
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
    r.set_dtype(v1::DATA_TYPE_FLOAT32);
    r.set_reduce_op(v1::REDUCE_OP_AVERAGE);
    r.set_prescale(2.0);
    r.set_postscale(0.5);
    r.add_joined_ranks(2);
    r.set_contributing_ranks(2);
    add_tensor(r, "a", {3000});
    add_tensor(r, "empty", {0});
    add_tensor(r, "b", {70, 30});
    const bool joined = b.rank() == 2;
    std::vector<float> a(3000, b.rank() + 1.0f), bb(2100, 10.0f * (b.rank() + 1)), out_a(3000);
    std::vector<std::shared_ptr<PendingOp>> entries;
    if (joined) {
      entries = {nullptr, nullptr, nullptr};
    } else {
      entries = {op("a", {3000}, DataType::kFloat32, a.data(), out_a.data()),
                 op("empty", {0}, DataType::kFloat32, nullptr, nullptr),
                 op("b", {70, 30}, DataType::kFloat32, bb.data(), bb.data())};
    }
    for (int round = 0; round < 3; ++round) {
      if (!joined) {
        std::fill(bb.begin(), bb.end(), 10.0f * (b.rank() + 1));
        for (auto& e : entries) e->handle = std::make_shared<HandleState>(e->handle->name);
      }
      ex.execute(r, entries);
      if (joined) continue;
      for (auto& e : entries) ASSERT_TRUE(e->handle->status.is_ok()) << e->handle->status.to_string();
      // (1 + 2) * 2 / 2 contributors * 0.5 = 1.5 ; (10 + 20) * 2 / 2 * 0.5 = 15
      for (float v : out_a) ASSERT_EQ(v, 1.5f);
      for (float v : bb) ASSERT_EQ(v, 15.0f);
      EXPECT_EQ(a[0], b.rank() + 1.0f);  // out of place: input untouched
    }
  });
}

TEST(ShmPlanExecutor, ReducescatterKeepsOnlyThisRanksRowsOfEveryTensor) {
  const int size = 3;
  run_shm_ranks(size, {.chunk_bytes = 4096}, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), size);
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_REDUCESCATTER);
    r.set_dtype(v1::DATA_TYPE_BFLOAT16);
    r.set_reduce_op(v1::REDUCE_OP_AVERAGE);
    add_tensor(r, "rs", {1001, 3});
    std::vector<uint16_t> in(3003);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = float_to_bfloat16(static_cast<float>((i % 5) * size + b.rank()));
    auto e = op("rs", {1001, 3}, DataType::kBFloat16, in.data(), nullptr);
    ex.execute(r, {e});
    ASSERT_TRUE(e->handle->status.is_ok()) << e->handle->status.to_string();
    // 1001 rows over 3 ranks: 334, 334, 333 rows starting at rows 0, 334, 668.
    const int64_t rows = b.rank() < 2 ? 334 : 333, first = b.rank() * 334;
    ASSERT_EQ(e->handle->output.shape, (std::vector<int64_t>{rows, 3}));
    const auto* o = reinterpret_cast<const uint16_t*>(e->handle->output.bytes.data());
    for (int64_t j = 0; j < rows * 3; ++j) {
      // mean over ranks of (i % 5) * 3 + rank = (i % 5) * 3 + 1
      const auto i = static_cast<size_t>(first * 3 + j);
      ASSERT_EQ(bfloat16_to_float(o[j]), static_cast<float>((i % 5) * size + 1)) << j;
    }
  });
}

// Records what PlanExecutor tells telemetry.
class RecordingObserver final : public telemetry::PhaseObserver {
 public:
  struct Call {
    telemetry::Phase phase;
    telemetry::PhaseClock::time_point start, end;
    uint64_t bytes;
    std::string backend;
  };
  using telemetry::PhaseObserver::on_phase;
  void on_phase(const telemetry::ResponseGist&, telemetry::Phase phase, telemetry::PhaseClock::time_point start,
                telemetry::PhaseClock::time_point end, uint64_t bytes,
                std::string_view backend) override {
    calls.push_back({phase, start, end, bytes, std::string(backend)});
  }
  std::vector<Call> calls;
};

// Per response: pack (when there was packing), exactly one collective, unpack, in that order and
// back to back, each with this rank's payload bytes; the shm path reports its interleaved copies.
void expect_phases_of_one_response(const RecordingObserver& seen, uint64_t bytes,
                                   const std::string& backend) {
  int collectives = 0;
  for (size_t i = 0; i < seen.calls.size(); ++i) {
    const auto& c = seen.calls[i];
    collectives += c.phase == telemetry::Phase::kCollective;
    EXPECT_LE(c.start, c.end);
    EXPECT_EQ(c.bytes, bytes);
    EXPECT_EQ(c.backend, backend);
    if (i > 0) {
      EXPECT_EQ(seen.calls[i - 1].end, c.start) << "phases are laid end to end";
      EXPECT_LT(static_cast<int>(seen.calls[i - 1].phase), static_cast<int>(c.phase));
    }
  }
  EXPECT_EQ(collectives, 1);
}

TEST(ShmPlanExecutor, ReportsPackCollectiveUnpackOncePerResponse) {
  run_shm_ranks(2, {.chunk_bytes = 4096}, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), 2);
    RecordingObserver seen;
    ex.set_phase_observer(&seen, "shm");
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
    r.set_dtype(v1::DATA_TYPE_FLOAT16);  // widened in the slots: pack and unpack both copy
    r.set_reduce_op(v1::REDUCE_OP_SUM);
    add_tensor(r, "x", {5000});
    add_tensor(r, "y", {3});
    std::vector<uint16_t> x(5000, float_to_float16(1.0f)), y(3, float_to_float16(2.0f));
    auto ex_x = op("x", {5000}, DataType::kFloat16, x.data(), x.data());
    auto ex_y = op("y", {3}, DataType::kFloat16, y.data(), y.data());
    ex.execute(r, {ex_x, ex_y});
    ASSERT_TRUE(ex_x->handle->status.is_ok()) << ex_x->handle->status.to_string();
    EXPECT_EQ(float16_to_float(x[4999]), 2.0f);
    EXPECT_EQ(float16_to_float(y[2]), 4.0f);
    ASSERT_EQ(seen.calls.size(), 3u);
    expect_phases_of_one_response(seen, 5003 * 2, "shm");
  });
}

TEST(GlooPlanExecutor, ReportsPackCollectiveUnpackOncePerResponse) {
  run_ranks(2, [&](Backend& b) {
    PlanExecutor ex(b, b.rank(), 2);
    RecordingObserver seen;
    ex.set_phase_observer(&seen, "gloo");
    v1::Response r;
    r.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
    r.set_dtype(v1::DATA_TYPE_FLOAT32);
    r.set_reduce_op(v1::REDUCE_OP_AVERAGE);
    add_tensor(r, "x", {100});
    add_tensor(r, "y", {7});
    std::vector<float> x(100, 1.0f + b.rank()), y(7, 3.0f + b.rank());
    auto ex_x = op("x", {100}, DataType::kFloat32, x.data(), x.data());
    auto ex_y = op("y", {7}, DataType::kFloat32, y.data(), y.data());
    ex.execute(r, {ex_x, ex_y});
    ASSERT_TRUE(ex_y->handle->status.is_ok()) << ex_y->handle->status.to_string();
    EXPECT_EQ(x[99], 1.5f);
    EXPECT_EQ(y[6], 3.5f);
    ASSERT_LE(seen.calls.size(), 3u);  // a pack or unpack too short for the clock is left out
    expect_phases_of_one_response(seen, 107 * 4, "gloo");
  });
}

}  // namespace
}  // namespace hvrun::detail
