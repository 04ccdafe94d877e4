// The shm backend's finishing reduction (reduce_sources_finished): the one-pass loop two sources
// with both destinations take gives the same bits as the blocked loop (one destination), for
// every division (none, a power of two, another) and postscale, in place and out of place.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "worker_lib/backends/shm/reduce_kernels.h"

namespace hvrun::detail::shm {
namespace {

template <typename T>
std::vector<T> random_values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> value(-1000.0, 1000.0);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(value(rng));
  return v;
}

template <typename T>
void expect_one_pass_matches_blocked(DataType dtype) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                      ReduceOp::kProduct}) {
    for (int divisor : {1, 2, 3, 4}) {
      for (double postscale : {1.0, 0.5, 0.3, 7.0}) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{1024}, size_t{5000}}) {
          SCOPED_TRACE(testing::Message() << "op " << static_cast<int>(op) << " divisor "
                                          << divisor << " postscale " << postscale << " count "
                                          << count);
          const std::vector<T> a = random_values<T>(count, 1), b = random_values<T>(count, 2);
          const void* sources[] = {a.data(), b.data()};
          // One destination: the blocked loop with finish_block.
          std::vector<T> blocked(count);
          reduce_sources_finished(blocked.data(), nullptr, sources, 2, count, dtype, op, divisor,
                                  postscale);
          // Both destinations: the one-pass loop.
          std::vector<T> out(count), copy(count);
          reduce_sources_finished(out.data(), copy.data(), sources, 2, count, dtype, op, divisor,
                                  postscale);
          EXPECT_EQ(std::memcmp(out.data(), blocked.data(), count * sizeof(T)), 0);
          EXPECT_EQ(std::memcmp(copy.data(), blocked.data(), count * sizeof(T)), 0);
          // In place, as the shm backend runs it: the result over the first source and its
          // copy over the second.
          std::vector<T> x = a, y = b;
          const void* in_place[] = {x.data(), y.data()};
          reduce_sources_finished(x.data(), y.data(), in_place, 2, count, dtype, op, divisor,
                                  postscale);
          EXPECT_EQ(std::memcmp(x.data(), blocked.data(), count * sizeof(T)), 0);
          EXPECT_EQ(std::memcmp(y.data(), blocked.data(), count * sizeof(T)), 0);
        }
      }
    }
  }
}

TEST(ReduceSourcesFinished, OnePassMatchesBlockedFloat32) {
  expect_one_pass_matches_blocked<float>(DataType::kFloat32);
}

TEST(ReduceSourcesFinished, OnePassMatchesBlockedFloat64) {
  expect_one_pass_matches_blocked<double>(DataType::kFloat64);
}

TEST(ReduceSourcesFinished, AverageAsSumWithPostscaleEqualsAverageForTwoRanks) {
  // hvrun.torch's Average (a sum, postscale 1/2) and the library's (divisor 2) agree bitwise.
  const std::vector<float> a = random_values<float>(3000, 3), b = random_values<float>(3000, 4);
  const void* sources[] = {a.data(), b.data()};
  std::vector<float> by_divisor(a.size()), by_postscale(a.size()), copy(a.size());
  reduce_sources_finished(by_divisor.data(), copy.data(), sources, 2, a.size(),
                          DataType::kFloat32, ReduceOp::kAverage, 2, 1.0);
  reduce_sources_finished(by_postscale.data(), copy.data(), sources, 2, a.size(),
                          DataType::kFloat32, ReduceOp::kSum, 1, 0.5);
  EXPECT_EQ(std::memcmp(by_divisor.data(), by_postscale.data(), a.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace hvrun::detail::shm
