// The negotiation loop negotiates each batch on the gRPC thread that received it and sends the
// plans it makes due at once (no hop to another thread on the latency path); the loop thread
// keeps the clock (cycle time).
// These pin both halves down through the real service.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tests/coordinator/service_fixture.h"

namespace hvrun::coordinator {
namespace {

using testing::options_for;
using testing::register_all;
using testing::start_server;
using testing::TestClient;
using testing::TestStream;

// A lone tensor made ready by the last rank's batch is planned at once: with a 30 s cycle,
// a plan that waited for the clock would miss the streams' 10 s deadline.
TEST(CoordinatorLatency, LoneReadyTensorIsPlannedWithoutWaitingForTheCycle) {
  auto options = options_for(2);
  options.cycle_time = std::chrono::seconds(30);
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  register_all(client, 2);
  std::vector<std::unique_ptr<TestStream>> streams;
  for (int r = 0; r < 2; ++r) {
    streams.push_back(std::make_unique<TestStream>(client, std::chrono::seconds(10)));
    ASSERT_TRUE(streams[r]->hello(r));
    v1::CoordinatorMessage welcome;
    ASSERT_TRUE(streams[r]->read(&welcome));
  }
  for (int step = 0; step < 3; ++step) {
    v1::RequestBatch batch;
    *batch.add_requests() = testing::allreduce_request("tiny." + std::to_string(step), {1});
    for (auto& s : streams) ASSERT_TRUE(s->send(batch));
    for (auto& s : streams) {
      v1::CoordinatorMessage message;
      ASSERT_TRUE(s->read(&message)) << "step " << step;
      ASSERT_TRUE(message.has_plan()) << message.DebugString();
      ASSERT_EQ(message.plan().responses_size(), 1);
      EXPECT_EQ(message.plan().responses(0).tensors(0).name(), "tiny." + std::to_string(step));
    }
  }
  for (auto& s : streams) {
    ASSERT_TRUE(s->goodbye());
    EXPECT_TRUE(s->close().ok());
  }
}

// A ready allreduce that could still be fused with one some rank has submitted waits for the
// cycle; nothing else arrives, so only the loop thread's deadline can send it.
TEST(CoordinatorLatency, ReadyTensorWaitingForCompanyGoesAtTheCycleDeadline) {
  constexpr auto kCycle = std::chrono::milliseconds(80);
  auto options = options_for(2);
  options.cycle_time = kCycle;
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  register_all(client, 2);
  std::vector<std::unique_ptr<TestStream>> streams;
  for (int r = 0; r < 2; ++r) {
    streams.push_back(std::make_unique<TestStream>(client, std::chrono::seconds(10)));
    ASSERT_TRUE(streams[r]->hello(r));
    v1::CoordinatorMessage welcome;
    ASSERT_TRUE(streams[r]->read(&welcome));
  }
  v1::RequestBatch both;
  *both.add_requests() = testing::allreduce_request("a", {4});
  *both.add_requests() = testing::allreduce_request("b", {4});
  v1::RequestBatch only_a;
  *only_a.add_requests() = testing::allreduce_request("a", {4});
  ASSERT_TRUE(streams[0]->send(both));
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(streams[1]->send(only_a));
  for (auto& s : streams) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(s->read(&message));
    ASSERT_TRUE(message.has_plan()) << message.DebugString();
    ASSERT_EQ(message.plan().responses_size(), 1);
    ASSERT_EQ(message.plan().responses(0).tensors_size(), 1);
    EXPECT_EQ(message.plan().responses(0).tensors(0).name(), "a");
  }
  const auto waited = std::chrono::steady_clock::now() - sent;
  EXPECT_GE(waited, kCycle) << "'a' did not wait for company";
  // The loop thread's deadline sends it, not the next stall check (seconds away by default).
  EXPECT_LT(waited, std::chrono::seconds(3)) << "'a' missed its cycle deadline";
  // b completes as soon as rank 1 submits it (nothing could join it any more).
  v1::RequestBatch only_b;
  *only_b.add_requests() = testing::allreduce_request("b", {4});
  ASSERT_TRUE(streams[1]->send(only_b));
  for (auto& s : streams) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(s->read(&message));
    ASSERT_TRUE(message.has_plan()) << message.DebugString();
    EXPECT_EQ(message.plan().responses(0).tensors(0).name(), "b");
  }
  for (auto& s : streams) {
    ASSERT_TRUE(s->goodbye());
    EXPECT_TRUE(s->close().ok());
  }
}

// Four ranks ping-pong lone cached tensors from their own threads, so every step's last batch
// negotiates (and sends) on a different gRPC thread: plans must still be identical on every
// rank, with seq increasing by one.
TEST(CoordinatorLatency, ConcurrentInlineNegotiationKeepsOnePlanOrder) {
  constexpr int kRanks = 4;
  constexpr int kSteps = 150;
  auto server = start_server(options_for(kRanks));
  ASSERT_TRUE(server);
  TestClient client(server->address());
  register_all(client, kRanks);
  std::vector<std::vector<std::string>> seen(kRanks);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      TestStream stream(client, std::chrono::seconds(30));
      ASSERT_TRUE(stream.hello(rank));
      v1::CoordinatorMessage message;
      ASSERT_TRUE(stream.read(&message));
      uint32_t id = 0;
      uint64_t last_seq = 0;
      for (int step = 0; step < kSteps; ++step) {
        v1::RequestBatch batch;
        if (id != 0) {
          batch.add_cached_ids(id);
        } else {
          *batch.add_requests() = testing::allreduce_request("ping", {1});
        }
        ASSERT_TRUE(stream.send(batch));
        ASSERT_TRUE(stream.read(&message));
        ASSERT_TRUE(message.has_plan()) << message.DebugString();
        if (last_seq != 0) {
          EXPECT_EQ(message.plan().seq(), last_seq + 1);
        }
        last_seq = message.plan().seq();
        seen[rank].push_back(message.plan().SerializeAsString());
        id = message.plan().responses(0).tensors(0).cache_id();
      }
      ASSERT_TRUE(stream.goodbye());
      EXPECT_TRUE(stream.close().ok());
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 1; rank < kRanks; ++rank) EXPECT_EQ(seen[rank], seen[0]) << "rank " << rank;
  auto end = server->wait_for_end(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->is_ok()) << end->to_string();
}

}  // namespace
}  // namespace hvrun::coordinator
