// The shared-memory backend in-process: threads act as ranks, each mapping the segment itself,
// bootstrapped through an in-memory key-value store. Every op x dtype x size (0, odd, latency
// path, many chunks with uneven parts) x 2-4 ranks against references, results bitwise equal on
// every rank, abort and timeout mid-collective, and no segment left in /dev/shm.
#include "worker_lib/backends/shm/shm_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "tests/support/in_process_ranks.h"
#include "tests/support/shm_files.h"
#include "tests/worker/tensor_values.h"
#include "worker_lib/backends/shm/shm_segment.h"
#include "worker_lib/runtime/cpu_backend_factory.h"

namespace hvrun::detail {
namespace {

using test::close_enough;
using test::input_value;
using test::kAllDtypes;
using test::load_value;
using test::store_value;

double reference(DataType t, ReduceOp op, int size, size_t i,
                 const std::vector<std::vector<double>>& in) {
  double acc = in[0][i];
  for (int k = 1; k < size; ++k) {
    double v = in[k][i];
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += v;
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  (void)t;
  return acc;
}

class ShmBackendTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmBackendTest, AllreduceEveryDtypeOpAndSizeMatchesReferenceOnEveryRankBitwise) {
  const int size = GetParam();
  ShmRanks cfg;
  cfg.chunk_bytes = 16 << 10;  // many chunks for the larger sizes, uneven parts
  const size_t sizes[] = {0, 1, 7, 1001, 2048, 5000, 65537};
  // Every rank's inputs (as doubles) and results (bytes), kept for the cross-rank comparison.
  std::mutex mutex;
  std::map<std::tuple<int, int, size_t>, std::vector<std::vector<std::byte>>> results;
  std::map<std::tuple<int, int, size_t>, std::vector<std::vector<double>>> inputs;
  for (DataType t : kAllDtypes)
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
      for (size_t n : sizes) {
        auto key = std::make_tuple(static_cast<int>(t), static_cast<int>(op), n);
        results[key].resize(size);
        inputs[key].resize(size);
      }
  run_shm_ranks(size, cfg, [&](Backend& b) {
    std::mt19937 rng(static_cast<unsigned>(b.rank() + 1));
    for (DataType t : kAllDtypes)
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
        for (size_t n : sizes) {
          std::vector<double> in(n);
          std::vector<std::byte> buf(std::max<size_t>(1, n) * dtype_size(t));
          for (size_t i = 0; i < n; ++i) {
            store_value(buf.data(), i, t, input_value(t, op, b.rank(), i, rng));
            in[i] = load_value(buf.data(), i, t);
          }
          Status s = b.allreduce(buf.data(), n, t, op);
          ASSERT_TRUE(s.is_ok()) << s.to_string();
          std::lock_guard<std::mutex> lock(mutex);
          auto key = std::make_tuple(static_cast<int>(t), static_cast<int>(op), n);
          results[key][b.rank()] = std::move(buf);
          inputs[key][b.rank()] = std::move(in);
        }
  });
  for (auto& [key, per_rank] : results) {
    auto [ti, opi, n] = key;
    DataType t = static_cast<DataType>(ti);
    ReduceOp op = static_cast<ReduceOp>(opi);
    for (int r = 1; r < size; ++r)
      ASSERT_EQ(0, std::memcmp(per_rank[r].data(), per_rank[0].data(), per_rank[0].size()))
          << "rank " << r << " differs from rank 0: dtype " << ti << " op " << opi << " n " << n;
    for (size_t i = 0; i < n; ++i) {
      double want = reference(t, op, size, i, inputs[key]);
      double got = load_value(per_rank[0].data(), i, t);
      ASSERT_TRUE(close_enough(got, want, t)) << "dtype " << ti << " op " << opi << " n " << n
                                              << " i " << i << ": " << got << " vs " << want;
    }
  }
}

TEST_P(ShmBackendTest, AllgathervBroadcastAlltoallvBarrierAcrossChunkSizes) {
  const int size = GetParam();
  ShmRanks cfg;
  cfg.chunk_bytes = 4096;  // small slots: several rounds per op
  run_shm_ranks(size, cfg, [&](Backend& b) {
    const int r = b.rank();
    for (size_t scale : {size_t{0}, size_t{1}, size_t{1000}, size_t{5000}}) {
      // Rank k contributes k * scale + k bytes (rank 0 nothing when scale is 0).
      std::vector<size_t> counts(size);
      for (int k = 0; k < size; ++k)
        counts[k] = static_cast<size_t>(k) * scale + static_cast<size_t>(k);
      const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
      std::vector<uint8_t> in(std::max<size_t>(1, counts[r]));
      for (size_t j = 0; j < counts[r]; ++j) in[j] = static_cast<uint8_t>(r * 31 + j);
      std::vector<uint8_t> out(std::max<size_t>(1, total), 255);
      ASSERT_TRUE(b.allgatherv(in.data(), out.data(), counts).is_ok());
      size_t at = 0;
      for (int k = 0; k < size; ++k)
        for (size_t j = 0; j < counts[k]; ++j)
          ASSERT_EQ(out[at++], static_cast<uint8_t>(k * 31 + j));

      for (int root = 0; root < size; ++root) {
        const size_t n = scale * 7 + 3;
        std::vector<uint8_t> buf(n);
        for (size_t j = 0; j < n; ++j) buf[j] = r == root ? static_cast<uint8_t>(root + j) : 0;
        ASSERT_TRUE(b.broadcast(buf.data(), n, root).is_ok());
        for (size_t j = 0; j < n; ++j) ASSERT_EQ(buf[j], static_cast<uint8_t>(root + j));
      }

      // Rank s sends ((s + d) % 3) * scale + d bytes of value s*16+d (+j) to rank d.
      auto pair_bytes = [&](int s, int d) {
        return static_cast<size_t>((s + d) % 3) * scale + static_cast<size_t>(d);
      };
      std::vector<size_t> send(size), recv(size);
      std::vector<uint8_t> sbuf;
      for (int d = 0; d < size; ++d) {
        send[d] = pair_bytes(r, d);
        recv[d] = pair_bytes(d, r);
        for (size_t j = 0; j < send[d]; ++j) sbuf.push_back(static_cast<uint8_t>(r * 16 + d + j));
      }
      sbuf.push_back(0);
      std::vector<uint8_t> rbuf(std::accumulate(recv.begin(), recv.end(), size_t{0}) + 1);
      ASSERT_TRUE(b.alltoallv(sbuf.data(), send, rbuf.data(), recv).is_ok());
      at = 0;
      for (int s = 0; s < size; ++s)
        for (size_t j = 0; j < recv[s]; ++j)
          ASSERT_EQ(rbuf[at++], static_cast<uint8_t>(s * 16 + r + j));
      ASSERT_TRUE(b.barrier().is_ok());
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShmBackendTest, ::testing::Values(1, 2, 3, 4));

// Ranks 0 and 1 wait in a large allreduce that rank 2 never joins; rank 2's abort (what the
// runtime does on JobAbort) must fail them promptly with its reason, not at the op timeout.
TEST(ShmBackendAbort, AbortOfOneRankWakesPeersBlockedMidCollective) {
  ShmRanks cfg;
  cfg.timeout = std::chrono::seconds(60);
  std::atomic<int> waiting{0};
  run_shm_ranks(3, cfg, [&](Backend& b) {
    if (b.rank() == 2) {
      while (waiting.load() < 2) std::this_thread::yield();  // bounded by the others' progress
      b.abort("test: rank 2 gone");
      EXPECT_EQ(b.barrier().code(), StatusCode::kAborted);
      return;
    }
    std::vector<float> data(3 << 20, 1.0f);
    auto t0 = std::chrono::steady_clock::now();
    waiting.fetch_add(1);
    Status s = b.allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_NE(s.message().find("test: rank 2 gone"), std::string::npos) << s.message();
    EXPECT_LT(waited, std::chrono::seconds(10));
    EXPECT_EQ(b.allreduce(data.data(), 1, DataType::kFloat32, ReduceOp::kSum).code(),
              StatusCode::kAborted);
  });
}

TEST(ShmBackendAbort, AbortFromAnotherThreadWakesThisRanksWait) {
  ShmRanks cfg;
  cfg.timeout = std::chrono::seconds(60);
  run_shm_ranks(2, cfg, [&](Backend& b) {
    if (b.rank() == 1) return;  // never joins
    std::atomic<int64_t> aborted_at{0};
    std::thread aborter([&] {
      // Not synchronisation (any order passes): gives the wait time to reach the futex, so
      // that the wake-up, not the 1 s re-check, is what ends it.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      aborted_at.store(std::chrono::steady_clock::now().time_since_epoch().count());
      b.abort("test: job aborted");
    });
    std::vector<double> data(5000, 1.0);
    Status s = b.allreduce(data.data(), data.size(), DataType::kFloat64, ReduceOp::kSum);
    const auto returned = std::chrono::steady_clock::now().time_since_epoch().count();
    aborter.join();
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_LT(std::chrono::steady_clock::duration(returned - aborted_at.load()),
              std::chrono::milliseconds(500))
        << "the abort did not wake the futex wait (the 1 s re-check ended it)";
  });
}

// Rank 0 waits at a barrier (asleep by then); rank 1 arrives, passes it and at once tears its
// side down as it leaves: rank 0 must still pass that barrier, since every rank arrived (rank
// 1's part of the step was done before it arrived), and fail its next one with the teardown's
// reason: a wait reads the arrival before the teardown.
TEST(ShmBackendAbort, APeerThatArrivedBeforeItsTeardownStillCountsAtThatBarrier) {
  ShmRanks cfg;
  cfg.timeout = std::chrono::seconds(60);
  run_shm_ranks(2, cfg, [&](Backend& b) {
    if (b.rank() == 1) {
      // Not synchronisation (any order passes): rank 0 is asleep in its wait by then, so that
      // it wakes to the arrival and the teardown together.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_TRUE(b.barrier().is_ok());
      b.abort("test: rank 1 leaving");
      return;
    }
    Status passed = b.barrier();
    EXPECT_TRUE(passed.is_ok()) << passed.to_string();
    Status next = b.barrier();
    EXPECT_EQ(next.code(), StatusCode::kAborted) << next.to_string();
    EXPECT_NE(next.message().find("test: rank 1 leaving"), std::string::npos) << next.message();
  });
}

// A rank that meets a teardown while the peer is still writing its reason (the peer between
// claiming the header and publishing the reason: descheduled, on a loaded machine) reports that
// reason, not a bare "torn down by a peer". Rank 1 here is a bare mapping of the segment that
// plays such a peer by hand.
TEST(ShmBackendAbort, ATeardownsReasonBeingWrittenIsWaitedFor) {
  MemoryStore store;
  const std::string job = fresh_job_id();
  std::atomic<bool> claimed{false};
  std::thread peer([&] {
    auto segment = shm::Segment::attach({.job_id = job, .host = "testhost", .local_rank = 1,
                                         .local_size = 2, .slot_bytes = 1 << 20,
                                         .kv_prefix = "shm/testhost",
                                         .timeout = std::chrono::seconds(20)},
                                        store);
    ASSERT_TRUE(segment.is_ok()) << segment.status().to_string();
    shm::SegmentHeader& h = (*segment)->header();
    uint32_t running = 0;
    ASSERT_TRUE(h.abort_state.compare_exchange_strong(running, 1));
    claimed.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::snprintf(h.abort_reason, sizeof h.abort_reason, "%s", "test: rank 1 leaving");
    h.abort_rank = 1;
    h.abort_state.store(2);
  });
  auto backend = make_shm_backend({.rank = 0, .size = 2, .job_id = job, .host = "testhost",
                                   .kv_prefix = "shm/testhost",
                                   .connect_timeout = std::chrono::seconds(20),
                                   .timeout = std::chrono::seconds(20)},
                                  store);
  ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!claimed.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  if (!claimed.load()) {
    peer.join();
    FAIL() << "the peer never claimed the header";
  }
  Status s = (*backend)->barrier();
  peer.join();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
  EXPECT_NE(s.message().find("test: rank 1 leaving"), std::string::npos) << s.message();
}

TEST(ShmBackendAbort, MissingPeerTimesOutAndFailsTheOthersToo) {
  ShmRanks cfg;
  cfg.timeout = std::chrono::milliseconds(300);
  run_shm_ranks(3, cfg, [&](Backend& b) {
    if (b.rank() == 2) return;  // never joins
    std::vector<int32_t> data(100, 1);
    auto t0 = std::chrono::steady_clock::now();
    Status s = b.allreduce(data.data(), data.size(), DataType::kInt32, ReduceOp::kSum);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    EXPECT_TRUE(s.code() == StatusCode::kDeadlineExceeded || s.code() == StatusCode::kAborted)
        << s.to_string();
    EXPECT_NE(s.message().find("local rank 2"), std::string::npos) << s.message();
  });
}

TEST(ShmSegment, SetupFailureLeavesNoSegment) {
  MemoryStore store;
  const std::string job = fresh_job_id();
  // Rank 1 of 2 never attaches: rank 0 gives up after the connect timeout and unlinks.
  auto backend = make_shm_backend({.rank = 0,
                                   .size = 2,
                                   .job_id = job,
                                   .host = "h",
                                   .connect_timeout = std::chrono::milliseconds(300)},
                                  store);
  ASSERT_FALSE(backend.is_ok());
  EXPECT_EQ(backend.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(backend.status().message().find("1 of 2"), std::string::npos)
      << backend.status().message();
  EXPECT_TRUE(test::shm_files_named(shm::segment_prefix(job)).empty());
}

TEST(ShmSegment, NamesCarryTheJobAndHostAndStayValidFileNames) {
  EXPECT_EQ(shm::segment_name("job1", "a/b c").rfind(shm::segment_prefix("job1"), 0), 0u);
  EXPECT_NE(shm::segment_name("job1", "hostA"), shm::segment_name("job1", "hostB"));
  EXPECT_NE(shm::segment_name("job1", "a/b"), shm::segment_name("job1", "a_b"));
  EXPECT_EQ(shm::segment_name("job1", "a/b").find('/'), std::string::npos);
}

}  // namespace
}  // namespace hvrun::detail

namespace hvrun::detail {
namespace {

TEST(CpuBackendChoice, EveryRankDecidesTheSameFromSettingsAndHosts) {
  CpuBackendConfig automatic;
  using Hosts = std::vector<std::string>;
  EXPECT_EQ(*choose_cpu_backend(automatic, Hosts{"a"}), CpuBackendKind::kGloo);  // one rank
  EXPECT_EQ(*choose_cpu_backend(automatic, Hosts{"a", "a", "a"}), CpuBackendKind::kShm);
  EXPECT_EQ(*choose_cpu_backend(automatic, Hosts{"a", "b", "a"}), CpuBackendKind::kHierarchical);
  // One rank per host: nothing to share, so auto keeps Gloo.
  EXPECT_EQ(*choose_cpu_backend(automatic, Hosts{"a", "b"}), CpuBackendKind::kGloo);
  CpuBackendConfig forced = automatic;
  forced.hierarchical = "on";
  EXPECT_EQ(*choose_cpu_backend(forced, Hosts{"a", "b"}), CpuBackendKind::kHierarchical);
  forced.hierarchical = "off";
  EXPECT_EQ(*choose_cpu_backend(forced, Hosts{"a", "b", "a"}), CpuBackendKind::kGloo);
  forced.backend = "shm";
  auto refused = choose_cpu_backend(forced, Hosts{"a", "b", "a"});
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("--hierarchical-allreduce"), std::string::npos);
  CpuBackendConfig gloo = automatic;
  gloo.backend = "gloo";
  EXPECT_EQ(*choose_cpu_backend(gloo, Hosts{"a", "a"}), CpuBackendKind::kGloo);
}

}  // namespace
}  // namespace hvrun::detail
