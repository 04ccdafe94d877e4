// The coordinator's gRPC service over real sockets on 127.0.0.1 (port 0), with test clients:
// registration, the key-value store, authentication, options.
#include <unistd.h>

#include <array>
#include <future>
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "tests/coordinator/service_fixture.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

// A worker of the launcher's plan (no requested rank) registering on a thread of its own.
std::future<v1::RegisterResponse> register_planned(TestClient& client, const std::string& host,
                                                   int local_rank) {
  return std::async(std::launch::async, [&client, host, local_rank] {
    v1::RegisterRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    request.mutable_worker()->set_host(host);
    request.mutable_worker()->set_local_rank(local_rank);
    request.mutable_worker()->set_requested_rank(-1);
    v1::RegisterResponse response;
    auto ctx = client.context();
    EXPECT_TRUE(client.stub().Register(ctx.get(), request, &response).ok());
    return response;
  });
}

v1::HostPlacement placement_of(const v1::RegisterResponse& response) {
  v1::HostPlacement placement;
  EXPECT_TRUE(placement.ParseFromString(response.placement()));
  return placement;
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
    const v1::HostPlacement placement = placement_of(registered[r]);
    ASSERT_EQ(placement.host_of_rank_size(), 2);
    ASSERT_EQ(placement.hosts_size(), 1);
    EXPECT_EQ(placement.host_of_rank(r), 0u);
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
  for (auto [host, local] : std::vector<std::pair<std::string, int>>{{"beta", 0}, {"alpha", 1}, {"alpha", 0}})
    futures.push_back(register_planned(client, host, local));
  std::vector<v1::Topology> topology;
  for (auto& f : futures) {
    const v1::RegisterResponse response = f.get();
    topology.push_back(response.topology());
    const v1::HostPlacement placement = placement_of(response);
    ASSERT_EQ(placement.hosts_size(), 2);
    EXPECT_EQ(placement.hosts(0), "alpha");
    EXPECT_EQ(placement.hosts(1), "beta");
    EXPECT_EQ(std::vector<uint32_t>(placement.host_of_rank().begin(),
                                    placement.host_of_rank().end()),
              (std::vector<uint32_t>{0, 0, 1}));
  }
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

// Ranks placed round-robin over hosts, one host with fewer slots: local and cross ranks as
// Horovod defines them, and every rank's host in the placement.
TEST(CoordinatorService, InterleavedHostsGetLocalAndCrossRanksAndOnePlacement) {
  const std::vector<std::pair<std::string, int>> slots = {
      {"a", 0}, {"b", 0}, {"a", 1}, {"b", 1}, {"c", 0}};
  auto options = options_for(static_cast<int>(slots.size()));
  for (const auto& [host, local] : slots) options.plan.push_back({host, local});
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  std::vector<std::future<v1::RegisterResponse>> futures;
  for (const auto& [host, local] : slots) futures.push_back(register_planned(client, host, local));
  // rank: (local rank, local size, cross rank, cross size)
  const std::vector<std::array<int, 4>> expected = {
      {0, 2, 0, 3}, {0, 2, 1, 3}, {1, 2, 0, 2}, {1, 2, 1, 2}, {0, 1, 2, 3}};
  for (size_t r = 0; r < futures.size(); ++r) {
    const v1::RegisterResponse response = futures[r].get();
    const v1::Topology& t = response.topology();
    EXPECT_EQ(t.rank(), static_cast<int>(r));
    EXPECT_EQ((std::array<int, 4>{t.local_rank(), t.local_size(), t.cross_rank(), t.cross_size()}),
              expected[r])
        << "rank " << r;
    const v1::HostPlacement placement = placement_of(response);
    EXPECT_EQ(std::vector<std::string>(placement.hosts().begin(), placement.hosts().end()),
              (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(std::vector<uint32_t>(placement.host_of_rank().begin(),
                                    placement.host_of_rank().end()),
              (std::vector<uint32_t>{0, 1, 0, 1, 2}));
  }
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
        request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
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

TEST(CoordinatorService, KvSetTakesSeveralKeysInOneRequestAndRefusesAnEmptyOne) {
  auto server = start_server(options_for(1));
  ASSERT_TRUE(server);
  TestClient client(server->address());
  v1::KvSetRequest request;
  request.set_key("mesh/0/1");
  request.set_value("a");
  for (int peer : {2, 3}) {
    v1::KvEntry* more = request.add_more();
    more->set_key("mesh/0/" + std::to_string(peer));
    more->set_value(std::string(1, static_cast<char>('a' + peer - 1)));
  }
  v1::KvSetResponse set;
  auto ctx = client.context();
  ASSERT_TRUE(client.stub().KvSet(ctx.get(), request, &set).ok());
  v1::KvGetResponse got;
  ASSERT_TRUE(client.kv_get({"mesh/0/1", "mesh/0/2", "mesh/0/3"}, 1000, &got).ok());
  EXPECT_EQ(std::vector<std::string>(got.values().begin(), got.values().end()),
            (std::vector<std::string>{"a", "b", "c"}));

  // A request with an empty key sets nothing.
  v1::KvSetRequest bad;
  bad.set_key("mesh/1/0");
  bad.set_value("x");
  bad.add_more()->set_value("y");
  auto bad_ctx = client.context();
  grpc::Status refused = client.stub().KvSet(bad_ctx.get(), bad, &set);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::KvGetResponse none;
  EXPECT_EQ(client.kv_get({"mesh/1/0"}, 100, &none).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
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

// What a worker without HVRUN_SECRET sends (the metadata, empty) is a missing secret, not a
// wrong one; a wrong one is called wrong.
TEST(CoordinatorService, AnEmptySecretIsCalledMissingAndAnotherOneWrong) {
  auto server = start_server(options_for(1));
  ASSERT_TRUE(server);
  auto stub = v1::Coordinator::NewStub(
      grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials()));
  for (const auto& [sent, said] : std::vector<std::pair<std::string, std::string>>{
           {"", "carries no job secret"}, {"not-it", "carries a wrong job secret"}}) {
    grpc::ClientContext context;
    context.AddMetadata("x-hvrun-secret", sent);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::KvSetRequest request;
    request.set_key("k");
    v1::KvSetResponse response;
    const grpc::Status status = stub->KvSet(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_NE(status.error_message().find(said), std::string::npos)
        << "'" << sent << "': " << status.error_message();
  }
}

// A worker naming another job (its HVRUN_JOB_ID) is refused, both jobs named; its own job's
// workers and those naming none register.
TEST(CoordinatorService, AWorkerOfAnotherJobIsRefusedNamingBothJobs) {
  auto options = options_for(1);
  options.job_id = "adv-job-B";
  auto server = start_server(options);
  ASSERT_TRUE(server);
  TestClient client(server->address());
  auto register_as = [&](const std::string& job_id) {
    v1::RegisterRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    request.mutable_worker()->set_host("h");
    request.mutable_worker()->set_pid(4242);
    request.mutable_worker()->set_requested_rank(0);
    request.mutable_worker()->set_job_id(job_id);
    v1::RegisterResponse response;
    auto context = client.context();
    return client.stub().Register(context.get(), request, &response);
  };
  const grpc::Status refused = register_as("other-job");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("worker on host h (pid 4242) belongs to job "
                                         "'other-job'"),
            std::string::npos)
      << refused.error_message();
  EXPECT_NE(refused.error_message().find("runs job 'adv-job-B'"), std::string::npos)
      << refused.error_message();
  EXPECT_TRUE(register_as("adv-job-B").ok());
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
