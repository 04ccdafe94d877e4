// The coordinator's Negotiate streams over real sockets: abort reaching every stream, lost
// streams, protocol errors, stalls, and identical plans for many ranks.
#include <atomic>
#include <map>
#include <regex>
#include <thread>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "tests/coordinator/service_fixture.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

TEST(CoordinatorService, AbortReachesEveryStream) {
  EventLog log;
  RunningJob job(3, log.callback());
  job.server->abort("launcher: rank 9 of another host failed", 9, "gamma");
  for (auto& stream : job.streams) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(stream->read(&message));
    ASSERT_TRUE(message.has_abort());
    EXPECT_EQ(message.abort().reason(), "launcher: rank 9 of another host failed");
    EXPECT_EQ(message.abort().rank(), 9);
    EXPECT_EQ(message.abort().host(), "gamma");
    EXPECT_FALSE(stream->read(&message));
    EXPECT_EQ(stream->finish().error_code(), grpc::StatusCode::ABORTED);
  }
  EXPECT_TRUE(log.wait_for(CoordinatorEvent::Kind::kAborted).has_value());
  // Later calls hear the reason too.
  v1::KvGetResponse got;
  grpc::Status status = job.client.kv_get({"k"}, 1000, &got);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED);
}

TEST(CoordinatorService, WorkerAbortRequestReachesTheOthers) {
  RunningJob job(2);
  v1::WorkerMessage abort;
  abort.mutable_abort()->set_reason("rank 0: out of memory");
  abort.mutable_abort()->set_rank(0);
  v1::RequestBatch unused;
  ASSERT_TRUE(job.streams[0]->send(unused));  // a batch before the abort is harmless
  // Send the abort through the unary call this time.
  v1::AbortResponse response;
  auto ctx = job.client.context();
  ASSERT_TRUE(job.client.stub().Abort(ctx.get(), abort.abort(), &response).ok());
  v1::CoordinatorMessage message;
  ASSERT_TRUE(job.streams[1]->read(&message));
  ASSERT_TRUE(message.has_abort());
  EXPECT_EQ(message.abort().reason(), "rank 0: out of memory");
  EXPECT_EQ(message.abort().rank(), 0);
}

TEST(CoordinatorService, StreamDroppedWithoutGoodbyeAbortsTheOthers) {
  EventLog log;
  RunningJob job(3, log.callback());
  job.streams[1]->cancel();
  for (int r : {0, 2}) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(job.streams[r]->read(&message));
    ASSERT_TRUE(message.has_abort());
    EXPECT_NE(message.abort().reason().find("rank 1 on host localhost (pid 1001) disconnected"),
              std::string::npos)
        << message.abort().reason();
    EXPECT_EQ(message.abort().rank(), 1);
    EXPECT_EQ(job.streams[r]->finish().error_code(), grpc::StatusCode::ABORTED);
  }
  auto lost = log.wait_for(CoordinatorEvent::Kind::kWorkerLost);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->rank, 1);
  auto end = job.server->wait_for_end(std::chrono::seconds(5));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code(), StatusCode::kAborted);
}

TEST(CoordinatorService, ProtocolErrorAbortsTheJob) {
  RunningJob job(2);
  v1::RequestBatch bad;
  bad.add_cached_ids(77);
  ASSERT_TRUE(job.streams[0]->send(bad));
  v1::CoordinatorMessage message;
  ASSERT_TRUE(job.streams[1]->read(&message));
  ASSERT_TRUE(message.has_abort());
  EXPECT_NE(message.abort().reason().find("cache id 77"), std::string::npos);
}

TEST(CoordinatorService, AMessageItCannotParseAbortsTheJobNamingTheRank) {
  EventLog log;
  RunningJob job(3, log.callback());
  // A proto3 string that is not UTF-8 serializes (with a logged complaint) but cannot be
  // parsed: what an unchecked tensor name used to send.
  v1::RequestBatch batch;
  *batch.add_requests() = allreduce_request(std::string("grad.\xff\xfe"), {4});
  ASSERT_TRUE(job.streams[1]->send(batch));
  for (int r : {0, 1, 2}) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(job.streams[r]->read(&message)) << "rank " << r << " heard nothing";
    ASSERT_TRUE(message.has_abort()) << "rank " << r;
    EXPECT_NE(message.abort().reason().find("rank 1 on host localhost (pid 1001) sent a "
                                            "negotiation message the coordinator cannot parse"),
              std::string::npos)
        << message.abort().reason();
    EXPECT_EQ(message.abort().rank(), 1);
    EXPECT_FALSE(job.streams[r]->read(&message));
    EXPECT_EQ(job.streams[r]->finish().error_code(), grpc::StatusCode::ABORTED) << "rank " << r;
  }
  auto aborted = log.wait_for(CoordinatorEvent::Kind::kAborted);
  ASSERT_TRUE(aborted.has_value());
  EXPECT_EQ(aborted->rank, 1);
  EXPECT_NE(aborted->message.find("cannot parse"), std::string::npos) << aborted->message;
  auto end = job.server->wait_for_end(std::chrono::seconds(5));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code(), StatusCode::kAborted);
}

TEST(CoordinatorService, SecondStreamForARankIsRefused) {
  RunningJob job(1);
  TestStream again(job.client);
  ASSERT_TRUE(again.hello(0));
  v1::CoordinatorMessage message;
  EXPECT_FALSE(again.read(&message));
  EXPECT_EQ(again.finish().error_code(), grpc::StatusCode::ALREADY_EXISTS);
}

TEST(CoordinatorService, RankThatRegistersButNeverOpensItsStreamAbortsTheJob) {
  auto options = options_for(2);
  options.start_timeout = std::chrono::milliseconds(300);
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  register_all(client, 2);
  TestStream s0(client);
  ASSERT_TRUE(s0.hello(0));
  v1::CoordinatorMessage message;
  ASSERT_TRUE(s0.read(&message));
  ASSERT_TRUE(message.has_welcome());
  ASSERT_TRUE(s0.read(&message));  // bounded: the attach deadline is 300 ms after registration
  ASSERT_TRUE(message.has_abort());
  EXPECT_NE(message.abort().reason().find("rank 1 (host localhost, pid 1001) registered but did "
                                          "not open the negotiation stream"),
            std::string::npos)
      << message.abort().reason();
}

// Each of 16 ranks (its own thread, its own stream) runs 3 steps of 20 allreduces, the first in
// full and the others by the cache ids the plans gave; every rank must see the same plans.
TEST(CoordinatorService, ManyRanksSeeIdenticalPlanSequencesThroughTheCachedPath) {
  constexpr int kRanks = 16;
  constexpr int kTensors = 20;
  constexpr int kSteps = 3;
  auto options = options_for(kRanks);
  options.cycle_time = std::chrono::microseconds(200);
  options.fusion_threshold_bytes = 256;  // several responses per step
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  register_all(client, kRanks);
  std::vector<std::vector<std::string>> seen(kRanks);  // each rank's plans, serialized
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      TestStream stream(client);
      ASSERT_TRUE(stream.hello(rank));
      v1::CoordinatorMessage message;
      ASSERT_TRUE(stream.read(&message));
      std::map<std::string, uint32_t> ids;
      for (int step = 0; step < kSteps; ++step) {
        v1::RequestBatch batch;
        for (int t = kTensors - 1; t >= 0; --t) {  // backprop order
          const std::string name = "layer" + std::to_string(t);
          if (ids.count(name)) {
            batch.add_cached_ids(ids[name]);
          } else {
            *batch.add_requests() = testing::allreduce_request(name, {t + 1});
          }
        }
        ASSERT_TRUE(stream.send(batch));
        int done = 0;
        while (done < kTensors) {
          ASSERT_TRUE(stream.read(&message));
          ASSERT_TRUE(message.has_plan()) << message.DebugString();
          seen[rank].push_back(message.plan().SerializeAsString());
          for (const auto& response : message.plan().responses()) {
            EXPECT_EQ(response.error(), "");
            for (const auto& t : response.tensors()) {
              ids[t.name()] = t.cache_id();
              ++done;
            }
          }
        }
        EXPECT_EQ(done, kTensors);
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

TEST(CoordinatorService, StallShutdownAbortsNamingTheTensorAndTheMissingRank) {
  auto options = options_for(2);
  options.stall_shutdown = std::chrono::milliseconds(300);
  options.autopsy_on_stall = false;  // the abort at once, not after an autopsy's request
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  register_all(client, 2);
  TestStream s0(client), s1(client);
  v1::CoordinatorMessage message;
  ASSERT_TRUE(s0.hello(0) && s0.read(&message));
  ASSERT_TRUE(s1.hello(1) && s1.read(&message));
  v1::RequestBatch batch;
  *batch.add_requests() = testing::allreduce_request("only.rank0", {2});
  ASSERT_TRUE(s0.send(batch));
  for (TestStream* stream : {&s0, &s1}) {
    ASSERT_TRUE(stream->read(&message));  // bounded by the 300 ms stall shutdown
    ASSERT_TRUE(message.has_abort());
    EXPECT_NE(message.abort().reason().find("rank 1 (host localhost"), std::string::npos)
        << message.abort().reason();
    EXPECT_NE(message.abort().reason().find("has not submitted allreduce 'only.rank0' (waited"),
              std::string::npos)
        << message.abort().reason();
    EXPECT_NE(message.abort().reason().find("last completed operation: none yet"), std::string::npos)
        << message.abort().reason();
    EXPECT_EQ(message.abort().rank(), 1);
  }
}

// Rank 1 says goodbye (a clean exit) while ranks 0 and 2 wait in a collective it never
// submitted: the job is aborted naming rank 1, the rank that left, and it is not "finished".
// The job is not aborted (the waiting ranks may handle the failure and go on, or init again),
// but the departure is recorded as the cause the launcher's verdict names if the job fails, and
// the goodbyes that follow are no clean finish.
TEST(CoordinatorService, CleanGoodbyeWhileOthersWaitIsRecordedAsTheCauseNamingTheRankThatLeft) {
  EventLog log;
  RunningJob job(3, log.callback());
  v1::RequestBatch batch;
  *batch.add_requests() = testing::allreduce_request("x", {2});
  ASSERT_TRUE(job.streams[0]->send(batch));
  ASSERT_TRUE(job.streams[2]->send(batch));
  ASSERT_TRUE(job.streams[1]->goodbye());
  for (int r : {0, 2}) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(job.streams[r]->read(&message)) << "rank " << r << " never heard of 'x'";
    ASSERT_TRUE(message.has_plan()) << message.DebugString();
    ASSERT_EQ(message.plan().responses_size(), 1);
    EXPECT_NE(message.plan().responses(0).error().find("rank 1 left the job"), std::string::npos)
        << message.plan().responses(0).error();
  }
  auto cause = job.server->abort_cause();
  ASSERT_TRUE(cause.has_value());
  EXPECT_EQ(cause->rank, 1);
  EXPECT_TRUE(cause->departure);
  // The streams are apart: the goodbye may overtake one of the others' batches.
  EXPECT_TRUE(std::regex_search(cause->reason,
                                std::regex("^rank 1 left the job \\(shut down\\) without "
                                           "submitting allreduce 'x', which (ranks 0, 2 wait|"
                                           "rank [02] waits) for")))
      << cause->reason;
  ASSERT_TRUE(job.streams[0]->goodbye());
  ASSERT_TRUE(job.streams[2]->goodbye());
  auto end = job.server->wait_for_end(std::chrono::seconds(5));
  ASSERT_TRUE(end.has_value());
  std::lock_guard<std::mutex> lock(log.mutex);
  for (const CoordinatorEvent& event : log.events) {
    EXPECT_NE(event.kind, CoordinatorEvent::Kind::kJobFinished) << event.message;
    EXPECT_NE(event.kind, CoordinatorEvent::Kind::kAborted) << event.message;
  }
}

// Ranks submitting one name as two ops (the Python bindings' "allreduce.m", "allgather.m") both
// fail within the grace, each told both ranks and ops.
TEST(CoordinatorService, OneNameAsTwoOpsFailsOnEveryRankAfterTheGrace) {
  auto options = options_for(2);
  options.op_mismatch_grace = std::chrono::milliseconds(300);
  RunningJob job(options);
  v1::RequestBatch reduce;
  *reduce.add_requests() = testing::allreduce_request("allreduce.m", {2});
  v1::RequestBatch gather;
  *gather.add_requests() = testing::allreduce_request("allgather.m", {2});
  gather.mutable_requests(0)->set_op(v1::COLLECTIVE_OP_ALLGATHER);
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_TRUE(job.streams[0]->send(reduce));
  ASSERT_TRUE(job.streams[1]->send(gather));
  for (auto& stream : job.streams) {
    std::vector<std::string> errors;
    while (errors.size() < 2) {
      v1::CoordinatorMessage message;
      ASSERT_TRUE(stream->read(&message));
      ASSERT_TRUE(message.has_plan()) << message.DebugString();
      for (const auto& response : message.plan().responses()) errors.push_back(response.error());
    }
    EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(10));
    for (const std::string& error : errors) {
      EXPECT_NE(error.find("rank 0 submitted allreduce 'allreduce.m'"), std::string::npos) << error;
      EXPECT_NE(error.find("rank 1 submitted allgather 'allgather.m'"), std::string::npos) << error;
    }
  }
}

// A rank whose stream stays open but silent (a stopped or hung worker) aborts the job after the
// heartbeat timeout; one that heartbeats does not. The abort names the silent rank and its host.
TEST(CoordinatorService, SilentRankAbortsTheJobAfterTheHeartbeatTimeout) {
  auto options = options_for(2);
  options.heartbeat_timeout = std::chrono::milliseconds(400);
  options.autopsy_on_stall = false;  // the abort at once, not after an autopsy's request
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  register_all(client, 2);
  TestStream s0(client), s1(client);
  v1::CoordinatorMessage message;
  ASSERT_TRUE(s0.hello(0) && s0.read(&message));
  ASSERT_TRUE(s1.hello(1) && s1.read(&message));
  // Rank 0 heartbeats from a thread until the abort arrives; rank 1 says nothing.
  std::atomic<bool> stop{false};
  std::thread beating([&] {
    v1::WorkerMessage beat;
    beat.mutable_heartbeat()->set_last_plan_seq(0);
    while (!stop.load() && s0.write(beat)) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(s1.read(&message));  // bounded by the stream's 20 s deadline
  stop = true;
  beating.join();
  ASSERT_TRUE(message.has_abort());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(message.abort().rank(), 1) << message.abort().reason();
  EXPECT_NE(message.abort().reason().find("rank 1 on host localhost"), std::string::npos)
      << message.abort().reason();
  EXPECT_NE(message.abort().reason().find("sent no heartbeat"), std::string::npos)
      << message.abort().reason();
}

}  // namespace
}  // namespace hvrun::coordinator
