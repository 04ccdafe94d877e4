// The coordinator's gRPC service over real sockets on 127.0.0.1 (port 0), with test clients.
#include <condition_variable>
#include <future>
#include <unistd.h>
#include <map>
#include <mutex>
#include <thread>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "coordinator/server.h"
#include "tests/coordinator/test_client.h"

namespace hvrun::coordinator {
namespace {

using testing::TestClient;
using testing::TestStream;

CoordinatorOptions options_for(int world_size) {
  CoordinatorOptions options;
  options.world_size = world_size;
  options.secret = testing::kTestSecret;
  options.start_timeout = std::chrono::seconds(10);
  return options;
}

std::unique_ptr<CoordinatorServer> start_server(CoordinatorOptions options,
                                                CoordinatorServer::EventCallback on_event = nullptr) {
  auto server = CoordinatorServer::start(std::move(options), std::move(on_event));
  EXPECT_TRUE(server.is_ok()) << server.status().to_string();
  return server.is_ok() ? std::move(server).value() : nullptr;
}

// Registers ranks 0..n-1 concurrently; returns their responses.
std::vector<v1::RegisterResponse> register_all(TestClient& client, int n) {
  std::vector<std::future<v1::RegisterResponse>> futures;
  for (int r = 0; r < n; ++r) {
    futures.push_back(std::async(std::launch::async, [&client, r] {
      v1::RegisterResponse response;
      grpc::Status status = client.register_worker(r, "localhost", &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      return response;
    }));
  }
  std::vector<v1::RegisterResponse> responses;
  for (auto& f : futures) responses.push_back(f.get());
  return responses;
}

TEST(CoordinatorService, SmokeRegisterKvAndOneAllreduceGivesIdenticalPlans) {
  auto server = start_server(options_for(2));
  ASSERT_TRUE(server);
  TestClient client(server->address());
  auto registered = register_all(client, 2);
  ASSERT_EQ(registered.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(registered[r].topology().rank(), r);
    EXPECT_EQ(registered[r].topology().size(), 2);
    EXPECT_EQ(registered[r].topology().local_size(), 2);
    EXPECT_EQ(registered[r].topology().cross_size(), 1);
    EXPECT_EQ(registered[r].job_id(), server->job_id());
    EXPECT_EQ(registered[r].ranks_size(), 2);
  }

  ASSERT_TRUE(client.kv_set("gloo/0", "address-of-0").ok());
  v1::KvGetResponse got;
  ASSERT_TRUE(client.kv_get({"gloo/0"}, 1000, &got).ok());
  ASSERT_EQ(got.values_size(), 1);
  EXPECT_EQ(got.values(0), "address-of-0");

  TestStream s0(client), s1(client);
  ASSERT_TRUE(s0.hello(0));
  ASSERT_TRUE(s1.hello(1));
  v1::CoordinatorMessage m0, m1;
  ASSERT_TRUE(s0.read(&m0));
  ASSERT_TRUE(s1.read(&m1));
  ASSERT_TRUE(m0.has_welcome());
  ASSERT_TRUE(m1.has_welcome());

  v1::RequestBatch batch;
  *batch.add_requests() = testing::allreduce_request("grad", {4});
  ASSERT_TRUE(s0.send(batch));
  ASSERT_TRUE(s1.send(batch));
  ASSERT_TRUE(s0.read(&m0));
  ASSERT_TRUE(s1.read(&m1));
  ASSERT_TRUE(m0.has_plan());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(m0, m1));
  ASSERT_EQ(m0.plan().responses_size(), 1);
  EXPECT_EQ(m0.plan().responses(0).tensors(0).name(), "grad");
  EXPECT_EQ(m0.plan().responses(0).error(), "");

  ASSERT_TRUE(s0.goodbye());
  ASSERT_TRUE(s1.goodbye());
  EXPECT_TRUE(s0.close().ok());
  EXPECT_TRUE(s1.close().ok());
  auto end = server->wait_for_end(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->is_ok()) << end->to_string();
}

// Events the server reported, for assertions from the test thread.
struct EventLog {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<CoordinatorEvent> events;
  CoordinatorServer::EventCallback callback() {
    return [this](const CoordinatorEvent& event) {
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back(event);
      changed.notify_all();
    };
  }
  std::optional<CoordinatorEvent> wait_for(CoordinatorEvent::Kind kind) {
    std::unique_lock<std::mutex> lock(mutex);
    std::optional<CoordinatorEvent> found;
    changed.wait_for(lock, std::chrono::seconds(10), [&] {
      for (const auto& e : events) {
        if (e.kind == kind) found = e;
      }
      return found.has_value();
    });
    return found;
  }
};

TEST(CoordinatorService, StartTimeoutNamesTheMissingRanksAndHosts) {
  auto options = options_for(3);
  options.start_timeout = std::chrono::milliseconds(300);
  options.plan = {{"alpha", 0}, {"alpha", 1}, {"beta", 0}};
  EventLog log;
  auto server = start_server(options, log.callback());
  ASSERT_TRUE(server);
  TestClient client(server->address());
  v1::RegisterResponse response;
  const auto started = std::chrono::steady_clock::now();
  grpc::Status status = client.register_worker(1, "alpha", &response);
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(status.error_message().find("1 of 3 ranks registered"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("rank 0 (host alpha, local rank 0)"), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find("rank 2 (host beta, local rank 0)"), std::string::npos)
      << status.error_message();
  EXPECT_GE(waited, std::chrono::milliseconds(300));
  EXPECT_LT(waited, std::chrono::seconds(5));
  auto event = log.wait_for(CoordinatorEvent::Kind::kRegistrationFailed);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(event->message, status.error_message());
  auto end = server->wait_for_end(std::chrono::seconds(5));
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(end->code(), StatusCode::kDeadlineExceeded);
}

TEST(CoordinatorService, TopologyFollowsThePlan) {
  auto options = options_for(3);
  options.plan = {{"alpha", 0}, {"alpha", 1}, {"beta", 0}};
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  std::vector<std::future<v1::RegisterResponse>> futures;
  for (auto [host, local] : std::vector<std::pair<std::string, int>>{{"beta", 0}, {"alpha", 1}, {"alpha", 0}}) {
    futures.push_back(std::async(std::launch::async, [&client, host = host, local = local] {
      v1::RegisterRequest request;
      request.set_protocol_version(1);
      request.mutable_worker()->set_host(host);
      request.mutable_worker()->set_local_rank(local);
      request.mutable_worker()->set_requested_rank(-1);
      v1::RegisterResponse response;
      auto ctx = client.context();
      EXPECT_TRUE(client.stub().Register(ctx.get(), request, &response).ok());
      return response;
    }));
  }
  std::vector<v1::Topology> topology;
  for (auto& f : futures) topology.push_back(f.get().topology());
  EXPECT_EQ(topology[0].rank(), 2);
  EXPECT_EQ(topology[0].local_size(), 1);
  EXPECT_EQ(topology[0].cross_rank(), 1);
  EXPECT_EQ(topology[0].cross_size(), 2);
  EXPECT_EQ(topology[1].rank(), 1);
  EXPECT_EQ(topology[1].local_rank(), 1);
  EXPECT_EQ(topology[1].local_size(), 2);
  EXPECT_EQ(topology[1].cross_size(), 1);
  EXPECT_EQ(topology[2].rank(), 0);
}

TEST(CoordinatorService, RanksSharingAGpuOrDifferingInNcclFailTheRendezvous) {
  struct Case {
    std::vector<std::pair<std::string, int>> gpu_and_nccl;
    std::string expected;
  };
  for (const Case& c : {Case{{{"GPU-a", 22000}, {"GPU-a", 22000}}, "both use GPU GPU-a"},
                        Case{{{"GPU-a", 22000}, {"GPU-b", 21803}}, "different NCCL versions"}}) {
    auto server = start_server(options_for(2));
    ASSERT_TRUE(server);
    TestClient client(server->address());
    std::vector<std::future<grpc::Status>> futures;
    for (int r = 0; r < 2; ++r) {
      futures.push_back(std::async(std::launch::async, [&, r] {
        v1::RegisterRequest request;
        request.set_protocol_version(1);
        request.mutable_worker()->set_host("h");
        request.mutable_worker()->set_requested_rank(r);
        request.mutable_worker()->set_gpu_uuid(c.gpu_and_nccl[r].first);
        request.mutable_worker()->set_nccl_version(c.gpu_and_nccl[r].second);
        v1::RegisterResponse response;
        auto ctx = client.context();
        return client.stub().Register(ctx.get(), request, &response);
      }));
    }
    for (auto& f : futures) {
      grpc::Status status = f.get();
      EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
      EXPECT_NE(status.error_message().find(c.expected), std::string::npos) << status.error_message();
    }
  }
}

TEST(CoordinatorService, RegistrationErrorsAreImmediate) {
  auto server = start_server(options_for(2));
  ASSERT_TRUE(server);
  TestClient client(server->address());
  v1::RegisterResponse response;
  EXPECT_EQ(client.register_worker(5, "h", &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::RegisterRequest old;
  old.set_protocol_version(7);
  auto ctx = client.context();
  grpc::Status status = client.stub().Register(ctx.get(), old, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("protocol version 7"), std::string::npos);
}

TEST(CoordinatorService, KvWaitTimesOutNamingTheKeyAndListsByPrefix) {
  auto server = start_server(options_for(1));
  ASSERT_TRUE(server);
  TestClient client(server->address());
  v1::KvGetResponse got;
  const auto started = std::chrono::steady_clock::now();
  grpc::Status status = client.kv_get({"nccl/id"}, 200, &got);
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(status.error_message().find("'nccl/id'"), std::string::npos) << status.error_message();
  EXPECT_GE(waited, std::chrono::milliseconds(200));
  EXPECT_LT(waited, std::chrono::seconds(5));

  // A waiter is woken by the set it waits for.
  auto waiter = std::async(std::launch::async, [&] {
    v1::KvGetResponse values;
    grpc::Status s = client.kv_get({"a/1", "a/2"}, 10000, &values);
    return std::make_pair(s.ok(), values.values_size());
  });
  ASSERT_TRUE(client.kv_set("a/1", "x").ok());
  ASSERT_TRUE(client.kv_set("a/2", "y").ok());
  ASSERT_TRUE(client.kv_set("b/1", "z").ok());
  auto [ok, count] = waiter.get();
  EXPECT_TRUE(ok);
  EXPECT_EQ(count, 2);

  v1::KvListRequest list;
  list.set_prefix("a/");
  v1::KvListResponse keys;
  auto ctx = client.context();
  ASSERT_TRUE(client.stub().KvList(ctx.get(), list, &keys).ok());
  EXPECT_EQ(std::vector<std::string>(keys.keys().begin(), keys.keys().end()),
            (std::vector<std::string>{"a/1", "a/2"}));
}

TEST(CoordinatorService, CallsWithoutOrWithAWrongSecretAreRejected) {
  auto server = start_server(options_for(1));
  ASSERT_TRUE(server);
  for (const std::string secret : {"", "wrong-secret"}) {
    TestClient client(server->address(), secret);
    v1::RegisterResponse response;
    EXPECT_EQ(client.register_worker(0, "h", &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(client.kv_set("k", "v").error_code(), grpc::StatusCode::UNAUTHENTICATED);
    TestStream stream(client);
    stream.hello(0);
    v1::CoordinatorMessage message;
    EXPECT_FALSE(stream.read(&message));
    EXPECT_EQ(stream.finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  // The rejected calls changed nothing.
  TestClient good(server->address());
  v1::KvGetResponse got;
  EXPECT_EQ(good.kv_get({"k"}, 0, &got).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// A job of `n` registered ranks with a welcomed stream each.
struct RunningJob {
  explicit RunningJob(int n, CoordinatorServer::EventCallback on_event = nullptr)
      : server(start_server(options_for(n), std::move(on_event))), client(server->address()) {
    register_all(client, n);
    for (int r = 0; r < n; ++r) {
      streams.push_back(std::make_unique<TestStream>(client));
      EXPECT_TRUE(streams.back()->hello(r));
      v1::CoordinatorMessage welcome;
      EXPECT_TRUE(streams.back()->read(&welcome));
      EXPECT_TRUE(welcome.has_welcome());
    }
  }
  std::unique_ptr<CoordinatorServer> server;
  TestClient client;
  std::vector<std::unique_ptr<TestStream>> streams;
};

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
    EXPECT_NE(message.abort().reason().find("allreduce 'only.rank0' has waited"), std::string::npos)
        << message.abort().reason();
    EXPECT_NE(message.abort().reason().find("for rank 1"), std::string::npos);
    EXPECT_EQ(message.abort().rank(), 1);
  }
}

TEST(CoordinatorService, ListensOnAUnixSocket) {
  auto options = options_for(1);
  const std::string path = ::testing::TempDir() + "hvrun-coord-test-" + std::to_string(getpid()) + ".sock";
  options.listen_address = "unix:" + path;
  auto server = start_server(options);
  ASSERT_TRUE(server);
  EXPECT_EQ(server->address(), options.listen_address);
  TestClient client(server->address());
  v1::RegisterResponse response;
  EXPECT_TRUE(client.register_worker(0, "localhost", &response).ok());
  server->shutdown();
  ::unlink(path.c_str());
}

TEST(CoordinatorService, StartRejectsBadOptions) {
  auto options = options_for(2);
  options.secret.clear();
  EXPECT_EQ(CoordinatorServer::start(options).status().code(), StatusCode::kInvalidArgument);
  auto taken = start_server(options_for(1));
  ASSERT_TRUE(taken);
  auto clash = options_for(1);
  clash.listen_address = taken->address();
  auto second = CoordinatorServer::start(clash);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace hvrun::coordinator
