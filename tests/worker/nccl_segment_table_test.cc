// Layout and segment tables of the GPU data plane, checked on the CPU: the tables are applied
// to host memory by a reference copier here, so a two-rank fused allreduce and an uneven
// allgather are verified end to end without a GPU.
#include "worker_lib/backends/nccl/segment_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace hvrun::detail::cuda {
namespace {

// What the pack/unpack kernels do, on host floats (neutral value 0 = Sum).
void run_on_host(const std::vector<Segment>& segments, double scale = 1.0) {
  for (const Segment& s : segments) {
    auto* dst = static_cast<float*>(s.dst);
    const auto* src = static_cast<const float*>(s.src);
    for (uint64_t i = 0; i < s.count; ++i)
      dst[i] = src ? static_cast<float>(src[i] * scale) : 0.0f;
  }
}

TEST(NcclSegmentTable, FusedLayoutAlignsEveryTensorTo16Bytes) {
  std::vector<uint64_t> counts{3, 5, 0, 4, 1};
  FusedLayout f32 = fused_layout(counts, 4);
  EXPECT_EQ(f32.offsets, (std::vector<uint64_t>{0, 4, 12, 12, 16}));
  EXPECT_EQ(f32.total, 17u);
  FusedLayout f64 = fused_layout(counts, 8);
  EXPECT_EQ(f64.offsets, (std::vector<uint64_t>{0, 4, 10, 10, 14}));
  FusedLayout u8 = fused_layout(counts, 1);
  EXPECT_EQ(u8.offsets, (std::vector<uint64_t>{0, 16, 32, 32, 48}));
  for (uint64_t o : f32.offsets) EXPECT_EQ(o * 4 % kFusionAlignmentBytes, 0u);
}

TEST(NcclSegmentTable, SplitCutsLongSegmentsAndKeepsNullSources) {
  std::vector<float> a(10), out(10);
  std::vector<Segment> in{{a.data(), out.data(), 10}, {nullptr, out.data(), 3}, {a.data(), out.data(), 0}};
  auto chunks = split_segments(in, 4, sizeof(float));
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].count, 4u);
  EXPECT_EQ(chunks[1].src, a.data() + 4);
  EXPECT_EQ(chunks[1].dst, out.data() + 4);
  EXPECT_EQ(chunks[2].count, 2u);
  EXPECT_EQ(chunks[2].src, a.data() + 8);
  EXPECT_EQ(chunks[3].src, nullptr);
  EXPECT_EQ(chunks[3].count, 3u);
}

// Two ranks, odd sizes, one joined tensor on rank 1: pack with prescale, "allreduce" by summing
// the two fusion buffers, unpack: every output equals the reference.
TEST(NcclSegmentTable, FusedAllreduceThroughTheTablesMatchesTheReference) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-4, 4);
  std::vector<uint64_t> counts{1, 7, 33, 0, 1025};
  const int ranks = 2;
  std::vector<std::vector<std::vector<float>>> in(ranks), out(ranks);
  for (int r = 0; r < ranks; ++r)
    for (uint64_t n : counts) {
      in[r].emplace_back(n);
      for (auto& v : in[r].back()) v = value(rng);
      out[r].emplace_back(n, -1.0f);
    }
  FusedLayout layout = fused_layout(counts, sizeof(float));
  std::vector<std::vector<float>> fusion(ranks, std::vector<float>(layout.total, 99.0f));
  for (int r = 0; r < ranks; ++r) {
    std::vector<const void*> sources;
    for (size_t i = 0; i < counts.size(); ++i)
      sources.push_back(r == 1 && i == 2 ? nullptr : in[r][i].data());  // rank 1 joined for tensor 2
    run_on_host(pack_segments(sources, counts, fusion[r].data(), layout, sizeof(float)), 0.5);
  }
  std::vector<float> reduced(layout.total);
  for (uint64_t i = 0; i < layout.total; ++i) reduced[i] = fusion[0][i] + fusion[1][i];
  for (int r = 0; r < ranks; ++r) {
    std::vector<void*> destinations;
    for (auto& o : out[r]) destinations.push_back(o.data());
    run_on_host(unpack_segments(destinations, counts, reduced.data(), layout, sizeof(float)), 2.0);
  }
  for (int r = 0; r < ranks; ++r)
    for (size_t i = 0; i < counts.size(); ++i)
      for (uint64_t j = 0; j < counts[i]; ++j) {
        float want = in[0][i][j] * 0.5f + (i == 2 ? 0.0f : in[1][i][j] * 0.5f);
        ASSERT_FLOAT_EQ(out[r][i][j], want * 2.0f) << "rank " << r << " tensor " << i << " element " << j;
      }
}

TEST(NcclSegmentTable, UnpackFromAnOffsetTakesTheReducescatterSlice) {
  std::vector<uint64_t> counts{10};
  FusedLayout layout = fused_layout(counts, sizeof(float));
  std::vector<float> fusion(10);
  std::iota(fusion.begin(), fusion.end(), 0.0f);
  std::vector<float> out(3);
  std::vector<void*> destinations{out.data()};
  std::vector<uint64_t> slice{3}, first{4};
  run_on_host(unpack_segments(destinations, slice, fusion.data(), layout, sizeof(float), first));
  EXPECT_EQ(out, (std::vector<float>{4, 5, 6}));
}

// Three ranks, two tensors, uneven first dimensions (one rank has no rows of tensor 0).
TEST(NcclSegmentTable, UnevenAllgatherOfTwoTensorsThroughTheTables) {
  const int size = 3;
  std::vector<std::vector<int64_t>> first_dims{{2, 0, 3}, {1, 4, 1}};
  std::vector<size_t> row_bytes{2 * sizeof(float), 3 * sizeof(float)};
  AllgatherLayout layout = allgather_layout(first_dims, row_bytes, size);
  EXPECT_EQ(layout.block_bytes, (std::vector<size_t>{(4 + 3) * 4, 12 * 4, (6 + 3) * 4}));
  EXPECT_EQ(layout.block_offset, (std::vector<size_t>{0, 28, 76}));
  EXPECT_EQ(layout.total_bytes, 112u);

  // Each rank's inputs: value = 1000 * rank + 100 * tensor + element.
  std::vector<std::vector<std::vector<float>>> in(size, std::vector<std::vector<float>>(2));
  for (int k = 0; k < size; ++k)
    for (size_t i = 0; i < 2; ++i) {
      size_t n = static_cast<size_t>(first_dims[i][k]) * row_bytes[i] / sizeof(float);
      for (size_t j = 0; j < n; ++j) in[k][i].push_back(1000.0f * k + 100.0f * i + j);
    }
  // Every rank packs its own block into a shared "gathered" buffer (what the NCCL call does).
  std::vector<float> gathered(layout.total_bytes / sizeof(float), -1);
  for (int k = 0; k < size; ++k) {
    std::vector<const void*> sources{in[k][0].data(), in[k][1].data()};
    run_on_host(allgather_pack_segments(sources, first_dims, row_bytes, layout, k, gathered.data(), sizeof(float)));
  }
  std::vector<float> out0(5 * 2), out1(6 * 3);
  std::vector<void*> outputs{out0.data(), out1.data()};
  run_on_host(allgather_unpack_segments(outputs, first_dims, row_bytes, layout, gathered.data(), sizeof(float)));
  std::vector<float> want0, want1;
  for (int k = 0; k < size; ++k) {
    want0.insert(want0.end(), in[k][0].begin(), in[k][0].end());
    want1.insert(want1.end(), in[k][1].begin(), in[k][1].end());
  }
  EXPECT_EQ(out0, want0);
  EXPECT_EQ(out1, want1);
}

TEST(NcclSegmentTable, EqualAllgatherBlocksAreContiguousForNcclAllGather) {
  std::vector<std::vector<int64_t>> first_dims{{2, 2, 2, 2}};
  std::vector<size_t> row_bytes{8};
  AllgatherLayout layout = allgather_layout(first_dims, row_bytes, 4);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(layout.block_bytes[k], 16u);
    EXPECT_EQ(layout.block_offset[k], k * 16);
  }
}

}  // namespace
}  // namespace hvrun::detail::cuda
