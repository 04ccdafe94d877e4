// Generations: workers that all said Goodbye may register again in the same job (a trainer's
// init -> shutdown -> init); each round gets a fresh rendezvous, key-value store and plans.
#include <future>

#include <gtest/gtest.h>

#include "tests/coordinator/service_fixture.h"

namespace hvrun::coordinator {
namespace {

using testing::RunningJob;
using testing::TestClient;
using testing::TestStream;
using testing::open_streams;

// Every stream says Goodbye and closes; the generation ends cleanly.
void leave_all(RunningJob& job) {
  for (auto& stream : job.streams) {
    ASSERT_TRUE(stream->goodbye());
    EXPECT_TRUE(stream->close().ok());
  }
  job.streams.clear();
}

TEST(CoordinatorGenerations, EveryRankRegistersAgainAfterLeavingAndNegotiatesAfresh) {
  RunningJob job(2);
  ASSERT_TRUE(job.client.kv_set("gloo/rank0", "old-address").ok());
  leave_all(job);
  auto end = job.server->wait_for_end(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->is_ok()) << end->to_string();

  auto responses = testing::register_all(job.client, 2);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(responses[r].topology().rank(), r);
  EXPECT_FALSE(job.server->wait_for_end(std::chrono::milliseconds(0)).has_value());
  // The data planes' bootstrap keys of the last generation are gone.
  v1::KvGetResponse value;
  EXPECT_EQ(job.client.kv_get({"gloo/rank0"}, 0, &value).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);

  auto streams = open_streams(job.client, 2);
  for (auto& stream : streams) {
    v1::RequestBatch batch;
    *batch.add_requests() = testing::allreduce_request("grad", {4});
    ASSERT_TRUE(stream->send(batch));
  }
  for (auto& stream : streams) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(stream->read(&message));
    ASSERT_TRUE(message.has_plan()) << message.DebugString();
    EXPECT_EQ(message.plan().seq(), 1u);  // a fresh plan sequence
    ASSERT_EQ(message.plan().responses_size(), 1);
    EXPECT_EQ(message.plan().responses(0).error(), "");
  }
  for (auto& stream : streams) {
    ASSERT_TRUE(stream->goodbye());
    EXPECT_TRUE(stream->close().ok());
  }
  end = job.server->wait_for_end(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->is_ok()) << end->to_string();
}

TEST(CoordinatorGenerations, EarlyRegistrationWaitsUntilTheOtherRanksLeft) {
  RunningJob job(2);
  ASSERT_TRUE(job.streams[0]->goodbye());
  EXPECT_TRUE(job.streams[0]->close().ok());
  auto rank0 = std::async(std::launch::async, [&] {
    v1::RegisterResponse response;
    return job.client.register_worker(0, "localhost", &response);
  });
  // Rank 1 still negotiates in the first generation: rank 0's registration waits for it.
  EXPECT_EQ(rank0.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  ASSERT_TRUE(job.streams[1]->goodbye());
  EXPECT_TRUE(job.streams[1]->close().ok());
  v1::RegisterResponse response;
  grpc::Status status = job.client.register_worker(1, "localhost", &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(rank0.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  status = rank0.get();
  EXPECT_TRUE(status.ok()) << status.error_message();
  auto streams = open_streams(job.client, 2);
  for (auto& stream : streams) {
    ASSERT_TRUE(stream->goodbye());
    EXPECT_TRUE(stream->close().ok());
  }
}

TEST(CoordinatorGenerations, RegistrationAfterAnAbortGetsTheAbort) {
  RunningJob job(2);
  job.server->abort("test abort", 1, "localhost");
  v1::RegisterResponse response;
  grpc::Status status = job.client.register_worker(0, "localhost", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED) << status.error_message();
  EXPECT_NE(status.error_message().find("test abort"), std::string::npos) << status.error_message();
}

}  // namespace
}  // namespace hvrun::coordinator
