// The Gloo data plane's mesh bootstrap (worker_lib/backends/gloo/mesh_bootstrap.h): every rank
// publishes one pair address per peer and reads the ones meant for it in one request, so what a
// rank reads grows as N (N^2 in all), where Gloo's own connectFullMesh reads every rank's whole
// list of addresses (N^2 per rank, N^3 in all). Ranks are threads with an in-memory store.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/in_process_ranks.h"
#include "worker_lib/backends/gloo/gloo_backend.h"
#include "worker_lib/backends/gloo/mesh_bootstrap.h"

namespace hvrun::detail {
namespace {

struct MeshRun {
  std::vector<std::string> failures;  // one per rank that could not connect or sum
  uint64_t reads = 0;
  uint64_t bytes_read = 0;
  size_t largest_value = 0;
  size_t keys = 0;
};

// Connects `size` ranks, then sums each rank's rank + 1 over the mesh.
MeshRun connect_and_sum(int size, std::chrono::milliseconds connect_timeout) {
  MemoryStore store;
  MeshRun run;
  run.failures.resize(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto backend = make_gloo_backend({.rank = r,
                                        .size = size,
                                        .store_prefix = "mesh-test",
                                        .connect_timeout = connect_timeout,
                                        .timeout = std::chrono::seconds(20)},
                                       store);
      std::string& failure = run.failures[static_cast<size_t>(r)];
      if (!backend.is_ok()) {
        failure = backend.status().to_string();
        return;
      }
      int32_t v = r + 1;
      Status s = (*backend)->allreduce(&v, 1, DataType::kInt32, ReduceOp::kSum);
      if (!s.is_ok() || v != size * (size + 1) / 2)
        failure = "sum " + std::to_string(v) + ": " + s.to_string();
    });
  }
  for (auto& t : threads) t.join();
  run.reads = store.reads();
  run.bytes_read = store.bytes_read();
  run.largest_value = store.largest_value("mesh-test/");
  run.keys = store.keys_under("mesh-test/");
  return run;
}

std::string failures_of(const MeshRun& run) {
  std::string text;
  for (size_t r = 0; r < run.failures.size(); ++r)
    if (!run.failures[r].empty())
      text += "rank " + std::to_string(r) + ": " + run.failures[r] + "\n";
  return text;
}

TEST(GlooMesh, EveryPairConnectsAndEachRankReadsOneAddressPerPeerInOneRequest) {
  MeshRun small = connect_and_sum(3, std::chrono::seconds(20));
  ASSERT_EQ(failures_of(small), "");
  MeshRun large = connect_and_sum(12, std::chrono::seconds(20));
  ASSERT_EQ(failures_of(large), "");
  // One batched read per rank, of one address per peer: a value (a pair's address) is the same
  // size at 3 ranks as at 12, where Gloo's key holds an address per pair (4 times larger at 12).
  EXPECT_EQ(small.reads, 3u);
  EXPECT_EQ(large.reads, 12u);
  EXPECT_EQ(large.keys, 12u * 11u);
  EXPECT_EQ(small.largest_value, large.largest_value);
  EXPECT_EQ(large.bytes_read, 12u * 11u * large.largest_value);
  std::printf("3 ranks: %llu bytes read in all; 12 ranks: %llu (value %zu bytes)\n",
              static_cast<unsigned long long>(small.bytes_read),
              static_cast<unsigned long long>(large.bytes_read), large.largest_value);
}

TEST(GlooMesh, OneRankAloneNeedsNoStore) {
  MeshRun run = connect_and_sum(1, std::chrono::seconds(5));
  EXPECT_EQ(failures_of(run), "");
  EXPECT_EQ(run.reads, 0u);
}

TEST(GlooMesh, ARankThatNeverComesFailsTheOthersAtTheirTimeoutSayingWhat) {
  // Three ranks expected, two start: both fail after the connect timeout, naming the mesh's keys.
  MemoryStore store;
  std::vector<std::string> failures(2);
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto backend = make_gloo_backend({.rank = r,
                                        .size = 3,
                                        .store_prefix = "mesh-missing",
                                        .connect_timeout = std::chrono::milliseconds(500),
                                        .timeout = std::chrono::seconds(5)},
                                       store);
      if (!backend.is_ok()) failures[static_cast<size_t>(r)] = backend.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (const std::string& f : failures) {
    EXPECT_NE(f.find("reading the other ranks' addresses"), std::string::npos) << f;
    EXPECT_NE(f.find("mesh-missing/"), std::string::npos) << f;
    EXPECT_NE(f.find("HVRUN_DATA_ADDR"), std::string::npos) << f;
  }
}

TEST(GlooMesh, ASparseMeshHasPairsOnlyWithRanksTwoToTheKApart) {
  EXPECT_EQ(mesh_peers(0, 13, true), (std::vector<int>{1, 2, 4, 5, 8, 9, 11, 12}));
  EXPECT_EQ(mesh_peers(5, 6, true), (std::vector<int>{0, 1, 3, 4}));  // 2 is 3 apart either way
  EXPECT_EQ(mesh_peers(1, 3, true), (std::vector<int>{0, 2}));
  EXPECT_EQ(mesh_peers(2, 4, false), (std::vector<int>{0, 1, 3}));
  for (int size : {2, 5, 13, 64, 513})
    for (int rank : {0, size / 2, size - 1}) {
      const auto peers = mesh_peers(rank, size, true);
      // Symmetric (a's peer b has a), and at most 2 per power of two below size.
      for (int p : peers) {
        const auto back = mesh_peers(p, size, true);
        EXPECT_NE(std::find(back.begin(), back.end(), rank), back.end()) << size << " " << rank;
      }
      int powers = 0;
      for (int apart = 1; apart < size; apart *= 2) ++powers;
      EXPECT_LE(static_cast<int>(peers.size()), 2 * powers) << size;
    }
}

TEST(GlooMesh, ASparseMeshAllreducesBroadcastsFromEveryRootAndPassesBarriers) {
  constexpr int kRanks = 13;
  MemoryStore store;
  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::string& failure = failures[static_cast<size_t>(r)];
      auto made = make_gloo_backend({.rank = r,
                                     .size = kRanks,
                                     .store_prefix = "sparse",
                                     .connect_timeout = std::chrono::seconds(20),
                                     .timeout = std::chrono::seconds(20),
                                     .sparse = true},
                                    store);
      if (!made.is_ok()) {
        failure = made.status().to_string();
        return;
      }
      Backend& b = **made;
      for (size_t n : {size_t{1}, size_t{1000}, size_t{100003}}) {
        std::vector<float> v(n, static_cast<float>(r + 1));
        Status s = b.allreduce(v.data(), n, DataType::kFloat32, ReduceOp::kSum);
        if (!s.is_ok() || v.front() != kRanks * (kRanks + 1) / 2 || v.back() != v.front())
          failure = "allreduce " + std::to_string(n) + ": " + s.to_string();
      }
      for (int root = 0; root < kRanks; ++root) {
        std::vector<int32_t> v(257, r == root ? root * 7 : -1);
        Status s = b.broadcast(v.data(), v.size() * sizeof(int32_t), root);
        if (!s.is_ok() || v.front() != root * 7 || v.back() != root * 7)
          failure = "broadcast from " + std::to_string(root) + ": " + s.to_string();
        if (Status barrier = b.barrier(); !barrier.is_ok()) failure = barrier.to_string();
      }
      std::vector<size_t> bytes(kRanks, 4);
      std::vector<char> out(4 * kRanks);
      Status refused = b.allgatherv(&r, out.data(), bytes);
      if (refused.message().find("sparse mesh") == std::string::npos)
        failure = "allgatherv on a sparse mesh: " + refused.to_string();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
  // Each rank published an address per peer: 8 peers at 13 ranks, not 12.
  EXPECT_EQ(store.keys_under("sparse/"), static_cast<size_t>(kRanks) * 8);
}

// Run in a child process (a death test): the descriptor limit is the whole process's.
[[noreturn]] void connect_alone_with_limits(rlim_t soft, rlim_t hard, int size) {
  rlimit limit{soft, hard};
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    std::fprintf(stderr, "setrlimit failed\n");
    std::_Exit(3);
  }
  MemoryStore store;
  auto backend = make_gloo_backend({.rank = 0,
                                    .size = size,
                                    .store_prefix = "mesh-limits",
                                    .connect_timeout = std::chrono::milliseconds(300),
                                    .timeout = std::chrono::seconds(5)},
                                   store);
  ::getrlimit(RLIMIT_NOFILE, &limit);
  std::fprintf(stderr, "soft limit after: %llu; %s\n",
               static_cast<unsigned long long>(limit.rlim_cur),
               backend.is_ok() ? "connected" : backend.status().to_string().c_str());
  std::_Exit(0);
}

TEST(GlooMeshDeathTest, AHardLimitTooLowForTheMeshFailsBeforeConnectingNamingTheLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // 300 peers need ~660 descriptors; the process may open 128.
  EXPECT_EXIT(connect_alone_with_limits(128, 128, 301), ::testing::ExitedWithCode(0),
              "RESOURCE_EXHAUSTED.*a Gloo mesh with 300 peers needs about [0-9]+ file "
              "descriptors on rank 0.*at most 128 \\(hard limit.*ulimit -Hn");
}

TEST(GlooMeshDeathTest, ASoftLimitTooLowForTheMeshIsRaisedUpToWhatItNeeds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < 1024)
    GTEST_SKIP() << "this machine's hard limit (" << limit.rlim_max << ") is below the test's 1024";
  // The mesh (300 peers, none of which comes) fails at its connect timeout, after the soft limit
  // went from 128 to what 300 peers need (over 600).
  EXPECT_EXIT(connect_alone_with_limits(128, limit.rlim_max, 301), ::testing::ExitedWithCode(0),
              "soft limit after: [6-9][0-9][0-9];.*reading the other ranks' addresses");
}

}  // namespace
}  // namespace hvrun::detail
