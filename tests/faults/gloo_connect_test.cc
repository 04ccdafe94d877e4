// Connecting the Gloo data plane: when make_gloo_backend returns on one rank, every rank of the
// context has finished connecting. A rank may then leave at once (a process set whose member has
// nothing more to do there) without failing a peer that is still completing its connection with
// "Connection closed by peer". Ranks are threads with an in-memory store.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/in_process_ranks.h"
#include "worker_lib/backends/gloo/gloo_backend.h"

namespace hvrun::detail {
namespace {

// One round: every rank connects, then drops its backend as soon as it has it. Returns the
// failures, one line per rank that could not connect.
std::vector<std::string> connect_and_leave(int size) {
  MemoryStore store;
  std::vector<std::string> failures(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto backend = make_gloo_backend({.rank = r,
                                        .size = size,
                                        .connect_timeout = std::chrono::seconds(20),
                                        .timeout = std::chrono::seconds(20)},
                                       store);
      if (!backend.is_ok()) failures[static_cast<size_t>(r)] = backend.status().to_string();
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> failed;
  for (auto& f : failures)
    if (!f.empty()) failed.push_back(f);
  return failed;
}

TEST(GlooConnect, ARankLeavingRightAfterConnectingFailsNoPeer) {
  constexpr int kRounds = 150;
  for (int round = 0; round < kRounds; ++round) {
    auto failed = connect_and_leave(2 + round % 3);
    ASSERT_TRUE(failed.empty()) << "round " << round << ": " << failed.front();
  }
}

}  // namespace
}  // namespace hvrun::detail
