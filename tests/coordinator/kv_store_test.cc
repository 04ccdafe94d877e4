// The job's key-value store (coordinator/rendezvous/kv_store.h): several keys set at once, many
// ranks each waiting for a key per peer (a Gloo mesh's bootstrap), and a timeout that names what
// is missing without listing every key of a large request.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/rendezvous/kv_store.h"

namespace hvrun::coordinator {
namespace {

std::string key(int from, int to) {
  return "mesh/" + std::to_string(from) + "/" + std::to_string(to);
}

TEST(KvStore, EveryRankWaitingForAKeyPerPeerGetsItsValuesOnceThePeersPublish) {
  constexpr int kRanks = 48;
  KvStore store;
  std::vector<std::thread> ranks;
  std::vector<std::string> failures(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      std::vector<std::pair<std::string, std::string>> mine;
      std::vector<std::string> theirs;
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        mine.emplace_back(key(r, p), std::to_string(r) + ">" + std::to_string(p));
        theirs.push_back(key(p, r));
      }
      // Half the ranks wait before they publish, so waiters are woken by every later set.
      if (r % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      store.set_many(std::move(mine));
      auto got = store.get(theirs, std::chrono::seconds(20));
      if (!got.is_ok()) {
        failures[r] = got.status().to_string();
        return;
      }
      size_t next = 0;
      for (int p = 0; p < kRanks; ++p) {
        if (p == r) continue;
        if ((*got)[next++] != std::to_string(p) + ">" + std::to_string(r))
          failures[r] = "wrong value from rank " + std::to_string(p);
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST(KvStore, ATimeoutNamesTheFirstMissingKeysAndCountsTheRest) {
  KvStore store;
  std::vector<std::string> keys;
  for (int p = 1; p < 20; ++p) keys.push_back(key(p, 0));
  store.set_many({{key(1, 0), "a"}, {key(3, 0), "b"}});
  auto got = store.get(keys, std::chrono::milliseconds(50));
  ASSERT_FALSE(got.is_ok());
  const std::string message = got.status().message();
  EXPECT_NE(message.find("'mesh/2/0', 'mesh/4/0'"), std::string::npos) << message;
  EXPECT_EQ(message.find("'mesh/1/0'"), std::string::npos) << message;
  EXPECT_EQ(message.find("'mesh/3/0'"), std::string::npos) << message;
  // 17 missing: 8 named, 9 counted.
  EXPECT_NE(message.find("and 9 more"), std::string::npos) << message;
  EXPECT_EQ(message.find("'mesh/19/0'"), std::string::npos) << message;
}

}  // namespace
}  // namespace hvrun::coordinator
