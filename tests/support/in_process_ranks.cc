#include "tests/support/in_process_ranks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "tests/support/shm_files.h"
#include "worker_lib/backends/gloo/gloo_backend.h"
#include "worker_lib/backends/shm/shm_backend.h"
#include "worker_lib/backends/shm/shm_segment.h"

namespace hvrun::detail {

void run_ranks(int size, const std::function<void(Backend&)>& fn) {
  MemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto backend = make_gloo_backend({.rank = r, .size = size, .connect_timeout = std::chrono::seconds(20),
                                        .timeout = std::chrono::seconds(20)},
                                       store);
      ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
      fn(**backend);
    });
  }
  for (auto& t : threads) t.join();
}

std::string fresh_job_id() {
  static std::atomic<int> counter{0};
  return "test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

void run_shm_ranks(int size, const ShmRanks& ranks, const std::function<void(Backend&)>& fn) {
  MemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto backend = make_shm_backend({.rank = r,
                                       .size = size,
                                       .job_id = ranks.job_id,
                                       .host = "testhost",
                                       .chunk_bytes = ranks.chunk_bytes,
                                       .kv_prefix = "shm/testhost",
                                       .connect_timeout = std::chrono::seconds(20),
                                       .timeout = ranks.timeout},
                                      store);
      ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
      fn(**backend);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(test::shm_files_named(shm::segment_prefix(ranks.job_id)).empty());
}

}  // namespace hvrun::detail
