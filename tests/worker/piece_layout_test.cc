// PieceLayout, the virtual buffer of a fused allreduce's pieces: large pieces start at the
// chosen place in a page (the backend's guard against 4K aliasing), small ones follow each other
// without gaps, and for_each maps every range back onto exactly the pieces' elements.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "worker_lib/backends/shm/piece_layout.h"

namespace hvrun::detail::shm {
namespace {

std::vector<ReducePiece> pieces_of(const std::vector<size_t>& counts) {
  std::vector<ReducePiece> pieces;
  for (size_t n : counts) pieces.push_back({nullptr, nullptr, n});
  return pieces;
}

TEST(PieceLayoutTest, LargePiecesStartAtTheShiftWithinAPageAndSmallOnesPackTight) {
  // In elements: pages of 1024, large from 16384, starting 512 into a page.
  const std::vector<ReducePiece> pieces = pieces_of({100, 20000, 7, 0, 16384, 3, 50000});
  PieceLayout layout;
  layout.assign(pieces, 1024, 16384, 512);
  std::vector<size_t> starts(pieces.size(), SIZE_MAX);
  std::vector<size_t> seen(pieces.size(), 0);
  layout.for_each(0, layout.total(), [&](const ReducePiece& p, size_t off, size_t v, size_t n) {
    const size_t i = static_cast<size_t>(&p - pieces.data());
    if (off == 0) starts[i] = v;
    EXPECT_EQ(off, seen[i]) << "piece " << i << " is covered in order, once";
    seen[i] += n;
  });
  for (size_t i = 0; i < pieces.size(); ++i) EXPECT_EQ(seen[i], pieces[i].count) << i;
  EXPECT_EQ(starts[0], 0u);
  EXPECT_EQ(starts[1] % 1024, 512u);
  EXPECT_EQ(starts[2], starts[1] + 20000) << "a small piece follows the one before it";
  EXPECT_EQ(starts[4] % 1024, 512u);
  EXPECT_EQ(starts[5], starts[4] + 16384);
  EXPECT_EQ(starts[6] % 1024, 512u);
  EXPECT_EQ(layout.total(), starts[6] + 50000);
}

TEST(PieceLayoutTest, ARangeInsideOneGapCoversNothing) {
  const std::vector<ReducePiece> pieces = pieces_of({10, 4096});
  PieceLayout layout;
  layout.assign(pieces, 1024, 4096, 512);
  int calls = 0;
  layout.for_each(10, 512, [&](const ReducePiece&, size_t, size_t, size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  layout.for_each(511, 513, [&](const ReducePiece& p, size_t off, size_t v, size_t n) {
    ++calls;
    EXPECT_EQ(&p, &pieces[1]);
    EXPECT_EQ(off, 0u);
    EXPECT_EQ(v, 512u);
    EXPECT_EQ(n, 1u);
  });
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace hvrun::detail::shm
