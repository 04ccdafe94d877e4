// Backend::abort() on the Gloo data plane: an operation blocked in this process fails at once
// with kAborted and the reason, a peer blocked on this rank fails promptly too (its connection
// closes), and later operations fail without touching the network. Ranks are threads with an
// in-memory store (tests/support/in_process_ranks.h); operation timeout 30 s, so only the
// teardown can explain a prompt failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "tests/support/in_process_ranks.h"
#include "worker_lib/backends/gloo/gloo_backend.h"

namespace hvrun::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kOpTimeout = std::chrono::seconds(30);
constexpr auto kPrompt = std::chrono::seconds(5);

// Connects `size` ranks (threads) and returns their backends.
std::vector<std::unique_ptr<Backend>> connect_ranks(int size, MemoryStore& store) {
  std::vector<std::unique_ptr<Backend>> backends(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto backend = make_gloo_backend(
          {.rank = r, .size = size, .connect_timeout = std::chrono::seconds(20), .timeout = kOpTimeout},
          store);
      if (backend.is_ok()) backends[static_cast<size_t>(r)] = std::move(backend).value();
    });
  }
  for (auto& t : threads) t.join();
  return backends;
}

TEST(GlooTeardown, AbortWakesAnOperationBlockedInThisProcess) {
  MemoryStore store;
  auto backends = connect_ranks(2, store);
  ASSERT_TRUE(backends[0] && backends[1]);
  std::vector<float> data(1 << 20, 1.0f);
  // Rank 0 enters an allreduce rank 1 never joins: only the teardown can end it before 30 s.
  auto start = Clock::now();
  auto blocked = std::async(std::launch::async, [&] {
    return backends[0]->allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
  });
  ASSERT_EQ(blocked.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the allreduce should block without its peer";
  backends[0]->abort("job aborted: test teardown");
  ASSERT_EQ(blocked.wait_for(kPrompt), std::future_status::ready) << "abort did not wake the op";
  Status status = blocked.get();
  EXPECT_EQ(status.code(), StatusCode::kAborted) << status.to_string();
  EXPECT_NE(status.message().find("test teardown"), std::string::npos) << status.to_string();
  EXPECT_LT(Clock::now() - start, kPrompt);
  // Later operations fail at once, with the same reason.
  Status later = backends[0]->barrier();
  EXPECT_EQ(later.code(), StatusCode::kAborted) << later.to_string();
}

TEST(GlooTeardown, PeerBlockedOnTheAbortedRankFailsPromptly) {
  MemoryStore store;
  auto backends = connect_ranks(3, store);
  ASSERT_TRUE(backends[0] && backends[1] && backends[2]);
  // Ranks 1 and 2 wait in a broadcast from rank 0, which never sends: rank 0 tears down.
  std::vector<std::future<Status>> waiting;
  std::vector<std::vector<int32_t>> buffers(3, std::vector<int32_t>(1024, 0));
  for (int r : {1, 2}) {
    waiting.push_back(std::async(std::launch::async, [&, r] {
      return backends[r]->broadcast(buffers[r].data(), buffers[r].size() * sizeof(int32_t), 0);
    }));
  }
  for (auto& w : waiting)
    ASSERT_EQ(w.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  auto start = Clock::now();
  backends[0]->abort("rank 0 lost the coordinator");
  for (auto& w : waiting) {
    ASSERT_EQ(w.wait_for(kPrompt), std::future_status::ready) << "a peer stayed blocked";
    EXPECT_FALSE(w.get().is_ok());
  }
  EXPECT_LT(Clock::now() - start, kPrompt);
}

}  // namespace
}  // namespace hvrun::detail
