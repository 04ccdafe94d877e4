// The Gloo backend in-process: threads act as ranks over an in-memory key-value store.
// Parameterised over world size; covers every dtype of allreduce, empty buffers, allgatherv with
// uneven (and empty) contributions, broadcast from each root, alltoallv with zero splits.
#include <cmath>
#include <condition_variable>
#include <numeric>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/in_process_ranks.h"
#include "worker_lib/half.h"

namespace hvrun::detail {
namespace {

class GlooBackendTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooBackendTest, AllreduceEveryDtypeAndOp) {
  int size = GetParam();
  run_ranks(size, [&](Backend& b) {
    int r = b.rank();
    for (size_t n : {size_t{0}, size_t{1}, size_t{1001}}) {
      std::vector<int32_t> i32(n, r + 1);
      ASSERT_TRUE(b.allreduce(i32.data(), n, DataType::kInt32, ReduceOp::kSum).is_ok());
      for (auto v : i32) ASSERT_EQ(v, size * (size + 1) / 2);
      std::vector<double> f64(n, r + 2.0);
      ASSERT_TRUE(b.allreduce(f64.data(), n, DataType::kFloat64, ReduceOp::kProduct).is_ok());
      double prod = 1;
      for (int k = 0; k < size; ++k) prod *= k + 2.0;
      for (auto v : f64) ASSERT_EQ(v, prod);
      std::vector<int8_t> i8(n, static_cast<int8_t>(-r));
      ASSERT_TRUE(b.allreduce(i8.data(), n, DataType::kInt8, ReduceOp::kMin).is_ok());
      for (auto v : i8) ASSERT_EQ(v, -(size - 1));
      std::vector<uint8_t> u8(n, static_cast<uint8_t>(r));
      ASSERT_TRUE(b.allreduce(u8.data(), n, DataType::kUInt8, ReduceOp::kMax).is_ok());
      for (auto v : u8) ASSERT_EQ(v, size - 1);
      std::vector<uint16_t> h(n, float_to_float16(0.5f));
      ASSERT_TRUE(b.allreduce(h.data(), n, DataType::kFloat16, ReduceOp::kSum).is_ok());
      for (auto v : h) ASSERT_EQ(float16_to_float(v), 0.5f * size);
      std::vector<uint16_t> bf(n, float_to_bfloat16(1.5f));
      ASSERT_TRUE(b.allreduce(bf.data(), n, DataType::kBFloat16, ReduceOp::kSum).is_ok());
      for (auto v : bf) ASSERT_EQ(bfloat16_to_float(v), 1.5f * size);
    }
  });
}

TEST_P(GlooBackendTest, AllgathervBroadcastAlltoallvBarrier) {
  int size = GetParam();
  run_ranks(size, [&](Backend& b) {
    int r = b.rank();
    // Rank k contributes k bytes of value k (rank 0 contributes nothing).
    std::vector<size_t> counts(size);
    size_t total = 0;
    for (int k = 0; k < size; ++k) total += counts[k] = static_cast<size_t>(k);
    std::vector<uint8_t> in(counts[r], static_cast<uint8_t>(r)), out(total, 255);
    ASSERT_TRUE(b.allgatherv(in.data(), out.data(), counts).is_ok());
    size_t at = 0;
    for (int k = 0; k < size; ++k)
      for (size_t j = 0; j < counts[k]; ++j) ASSERT_EQ(out[at++], k);

    for (int root = 0; root < size; ++root) {
      std::vector<int64_t> buf(7, r == root ? 1000 + root : -1);
      ASSERT_TRUE(b.broadcast(buf.data(), buf.size() * 8, root).is_ok());
      for (auto v : buf) ASSERT_EQ(v, 1000 + root);
    }

    // Rank r sends (r + d) % 3 bytes of value r*16+d to rank d.
    std::vector<size_t> send(size), recv(size);
    std::vector<uint8_t> sbuf;
    for (int d = 0; d < size; ++d) {
      send[d] = static_cast<size_t>((r + d) % 3);
      recv[d] = static_cast<size_t>((d + r) % 3);
      for (size_t j = 0; j < send[d]; ++j) sbuf.push_back(static_cast<uint8_t>(r * 16 + d));
    }
    std::vector<uint8_t> rbuf(std::max<size_t>(1, std::accumulate(recv.begin(), recv.end(), size_t{0})));
    ASSERT_TRUE(b.alltoallv(sbuf.data(), send, rbuf.data(), recv).is_ok());
    at = 0;
    for (int s = 0; s < size; ++s)
      for (size_t j = 0; j < recv[s]; ++j) ASSERT_EQ(rbuf[at++], s * 16 + r);
    ASSERT_TRUE(b.barrier().is_ok());
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, GlooBackendTest, ::testing::Values(1, 2, 3, 4));

// The packed fused allreduce stages at most one window (64 MiB) at a time: pieces that start,
// end and cross window boundaries, a joined rank's piece (no input) among them, and scaling,
// come out right on every rank.
TEST(GlooPackedPieces, PiecesAcrossStagingWindowsComeOutRight) {
  constexpr int kSize = 2;
  const std::vector<size_t> counts = {5, size_t{20} << 20, 3, 0, size_t{17} << 20, 7};
  run_ranks(kSize, [&](Backend& b) {
    const int r = b.rank();
    std::vector<std::vector<float>> in, out;
    std::vector<ReducePiece> pieces;
    for (size_t i = 0; i < counts.size(); ++i) {
      in.emplace_back(counts[i], static_cast<float>(r + 1 + i));
      out.emplace_back(counts[i], -1.0f);
    }
    for (size_t i = 0; i < counts.size(); ++i) {
      // Rank 1 has joined for piece 2: it contributes the identity (0 for a sum).
      const bool joined = r == 1 && i == 2;
      pieces.push_back({joined ? nullptr : in[i].data(), out[i].data(), counts[i]});
    }
    std::vector<std::byte> staging;
    const ReduceScaling scaling{.prescale = 2.0, .postscale = 0.5, .divisor = kSize};
    ASSERT_TRUE(allreduce_pieces_packed(b, pieces, DataType::kFloat32, ReduceOp::kAverage,
                                        scaling, staging, nullptr)
                    .is_ok());
    EXPECT_LE(staging.size(), size_t{64} << 20);
    for (size_t i = 0; i < counts.size(); ++i) {
      // (sum over contributing ranks of 2 * (k + 1 + i)) / 2 ranks * 0.5
      double sum = 0;
      for (int k = 0; k < kSize; ++k) {
        if (!(k == 1 && i == 2)) sum += 2.0 * (k + 1 + static_cast<double>(i));
      }
      const float want = static_cast<float>(sum / kSize * 0.5);
      for (size_t e = 0; e < counts[i]; e += (e < 10 ? 1 : 9973)) {
        ASSERT_EQ(out[i][e], want) << "piece " << i << " element " << e << " on rank " << r;
      }
      if (counts[i] > 0) {
        ASSERT_EQ(out[i].back(), want) << "piece " << i << " on rank " << r;
      }
    }
  });
}

TEST(HalfConversion, RoundTripsAndRounds) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 1000.5f})
    EXPECT_EQ(float16_to_float(float_to_float16(f)), f) << f;
  EXPECT_EQ(float16_to_float(float_to_float16(1e6f)), INFINITY);
  EXPECT_EQ(float16_to_float(float_to_float16(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
  for (float f : {0.0f, 1.0f, -3.0f, 256.0f, 1.5f}) EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(f)), f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(1.0f + 1.0f / 256)), 1.0f);
}

}  // namespace
}  // namespace hvrun::detail
