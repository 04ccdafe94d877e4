// Elastic jobs' memberships on the coordinator: a lost rank ends only its generation (the
// survivors hear a JobAbort marked membership_changed), the survivors register again and land
// in the launcher's next plan with new ranks, renumbered local ranks and fresh resource names;
// a membership change during a rendezvous moves its waiting workers on; a worker whose slot no
// plan has (a hot spare) waits, without the elastic timeout, until a membership names it.
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "tests/coordinator/service_fixture.h"

namespace hvrun::coordinator {
namespace {

using testing::EventLog;
using testing::TestClient;
using testing::open_streams;

CoordinatorOptions elastic_options(int n) {
  CoordinatorOptions options = testing::options_for(n);
  options.elastic = true;
  options.elastic_timeout = std::chrono::seconds(10);
  for (int r = 0; r < n; ++r) options.plan.push_back({"node", r});
  return options;
}

// A worker in slot (node, `slot`) that was started as rank `launch_rank` (`spare`: as a hot
// spare).
std::future<std::pair<grpc::Status, v1::RegisterResponse>> register_slot(TestClient& client,
                                                                         int slot,
                                                                         int launch_rank,
                                                                         bool spare = false) {
  return std::async(std::launch::async, [&client, slot, launch_rank, spare] {
    v1::RegisterRequest request;
    request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    request.mutable_worker()->set_host("node");
    request.mutable_worker()->set_local_rank(slot);
    request.mutable_worker()->set_pid(2000 + launch_rank);
    request.mutable_worker()->set_requested_rank(launch_rank);
    request.mutable_worker()->set_device_kind(v1::DEVICE_KIND_CPU);
    request.mutable_worker()->set_spare(spare);
    v1::RegisterResponse response;
    auto context = client.context(std::chrono::seconds(20));
    grpc::Status status = client.stub().Register(context.get(), request, &response);
    return std::make_pair(status, response);
  });
}

TEST(CoordinatorElastic, ALostRankEndsItsMembershipAndTheSurvivorsRenumber) {
  EventLog events;
  auto server = testing::start_server(elastic_options(3), events.callback());
  TestClient client(server->address());
  std::vector<std::future<std::pair<grpc::Status, v1::RegisterResponse>>> first;
  for (int r = 0; r < 3; ++r) first.push_back(register_slot(client, r, r));
  for (auto& f : first) ASSERT_TRUE(f.get().first.ok());
  auto streams = open_streams(client, 3);

  // Slot 1 dies: its stream breaks without Goodbye.
  streams[1]->cancel();
  for (int r : {0, 2}) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(streams[r]->read(&message));
    ASSERT_TRUE(message.has_abort()) << message.DebugString();
    EXPECT_TRUE(message.abort().membership_changed());
    EXPECT_NE(message.abort().reason().find("rank 1 on host node (pid 2001)"), std::string::npos)
        << message.abort().reason();
  }
  ASSERT_TRUE(events.wait_for(CoordinatorEvent::Kind::kMembershipEnded).has_value());
  // The job did not end.
  EXPECT_FALSE(server->wait_for_end(std::chrono::milliseconds(0)).has_value());

  // The survivors register again (with their stale launch ranks) before the launcher's plan.
  auto slot2 = register_slot(client, 2, 2);
  auto slot0 = register_slot(client, 0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server->change_membership({{"node", 0}, {"node", 2}}, "rank 1 was killed", -1, "node");
  auto [status0, response0] = slot0.get();
  auto [status2, response2] = slot2.get();
  ASSERT_TRUE(status0.ok()) << status0.error_message();
  ASSERT_TRUE(status2.ok()) << status2.error_message();
  EXPECT_EQ(response0.topology().rank(), 0);
  EXPECT_EQ(response2.topology().rank(), 1);
  EXPECT_EQ(response2.topology().size(), 2);
  EXPECT_EQ(response2.topology().local_rank(), 1);  // slot 2 is the host's second rank now
  EXPECT_EQ(response2.topology().local_size(), 2);
  EXPECT_EQ(response0.job_id(), server->job_id() + "-m1");  // fresh shared-memory names

  auto next = open_streams(client, 2);
  for (auto& stream : next) {
    v1::RequestBatch batch;
    *batch.add_requests() = testing::allreduce_request("grad", {4});
    ASSERT_TRUE(stream->send(batch));
  }
  for (auto& stream : next) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(stream->read(&message));
    ASSERT_TRUE(message.has_plan()) << message.DebugString();
    EXPECT_EQ(message.plan().seq(), 1u);
  }
  for (auto& stream : next) {
    ASSERT_TRUE(stream->goodbye());
    EXPECT_TRUE(stream->close().ok());
  }
  auto end = server->wait_for_end(std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->is_ok()) << end->to_string();
}

TEST(CoordinatorElastic, AChangeDuringARendezvousMovesItsWaitingWorkersOn) {
  auto server = testing::start_server(elastic_options(3), nullptr);
  TestClient client(server->address());
  // Slot 2 never registers (it died during start-up): the others wait in the rendezvous.
  auto slot0 = register_slot(client, 0, 0);
  auto slot1 = register_slot(client, 1, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server->change_membership({{"node", 0}, {"node", 1}}, "slot 2 exited", -1, "node");
  auto [status0, response0] = slot0.get();
  auto [status1, response1] = slot1.get();
  ASSERT_TRUE(status0.ok()) << status0.error_message();
  ASSERT_TRUE(status1.ok()) << status1.error_message();
  EXPECT_EQ(response0.topology().size(), 2);
  EXPECT_EQ(response1.topology().rank(), 1);
  server->shutdown();
}

// A hot spare: its slot is in no plan the launcher gave. It waits past the elastic timeout,
// through a membership that does not name it, and joins the one that gives it a lost rank's
// place.
TEST(CoordinatorElastic, AHotSpareIsParkedUntilAMembershipNamesIt) {
  CoordinatorOptions options = elastic_options(3);
  options.elastic_timeout = std::chrono::seconds(1);
  auto server = testing::start_server(options, nullptr);
  TestClient client(server->address());
  std::vector<std::future<std::pair<grpc::Status, v1::RegisterResponse>>> first;
  for (int r = 0; r < 3; ++r) first.push_back(register_slot(client, r, r));
  auto spare = register_slot(client, 3, 3, /*spare=*/true);
  for (auto& f : first) ASSERT_TRUE(f.get().first.ok());
  auto streams = open_streams(client, 3);
  // Parked: not in the first membership, and not failed by the elastic timeout.
  EXPECT_EQ(spare.wait_for(std::chrono::milliseconds(2500)), std::future_status::timeout);

  // Slot 2 dies; the launcher first shrinks (the spare stays parked), then names the spare.
  streams[2]->cancel();
  for (int r : {0, 1}) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(streams[r]->read(&message));
    ASSERT_TRUE(message.has_abort()) << message.DebugString();
  }
  server->change_membership({{"node", 0}, {"node", 1}}, "rank 2 was killed", -1, "node");
  EXPECT_EQ(spare.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  auto slot0 = register_slot(client, 0, 0);
  auto slot1 = register_slot(client, 1, 1);
  server->change_membership({{"node", 0}, {"node", 1}, {"node", 3}}, "a spare takes its place", -1,
                            "node");
  auto [status, response] = spare.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.topology().rank(), 2);
  EXPECT_EQ(response.topology().size(), 3);
  EXPECT_TRUE(slot0.get().first.ok());
  EXPECT_TRUE(slot1.get().first.ok());
  server->shutdown();
}

// Only a worker that says it is a spare is parked: another of no plan (a stray, a worker of a
// misconfigured launcher) is refused at the elastic timeout, as a job that never forms is.
TEST(CoordinatorElastic, AWorkerOfNoPlanThatIsNoSpareIsNotParked) {
  CoordinatorOptions options = elastic_options(1);
  options.elastic_timeout = std::chrono::seconds(1);
  auto server = testing::start_server(options, nullptr);
  TestClient client(server->address());
  ASSERT_TRUE(register_slot(client, 0, 0).get().first.ok());
  auto stray = register_slot(client, 1, 1);
  ASSERT_EQ(stray.wait_for(std::chrono::seconds(8)), std::future_status::ready)
      << "a worker of no plan that is no spare waits past the elastic timeout";
  EXPECT_FALSE(stray.get().first.ok());
  server->shutdown();
}

// A parked spare is answered when the server stops (its call would otherwise hold the server's
// shutdown).
TEST(CoordinatorElastic, AParkedSpareIsAnsweredWhenTheServerStops) {
  auto server = testing::start_server(elastic_options(1), nullptr);
  TestClient client(server->address());
  ASSERT_TRUE(register_slot(client, 0, 0).get().first.ok());
  auto spare = register_slot(client, 1, 1, /*spare=*/true);
  EXPECT_EQ(spare.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  const auto started = std::chrono::steady_clock::now();
  server->shutdown();
  auto [status, response] = spare.get();
  EXPECT_FALSE(status.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
}

TEST(CoordinatorElastic, AddedSlotsAreAnnouncedAndJoinOnceEveryRankLeft) {
  auto server = testing::start_server(elastic_options(2), nullptr);
  TestClient client(server->address());
  auto a = register_slot(client, 0, 0);
  auto b = register_slot(client, 1, 1);
  ASSERT_TRUE(a.get().first.ok());
  ASSERT_TRUE(b.get().first.ok());
  auto streams = open_streams(client, 2);
  // The new worker registers early: it waits for the reset.
  auto added = register_slot(client, 2, 2);
  server->add_slots({{"node", 0}, {"node", 1}, {"node", 2}}, 1);
  for (auto& stream : streams) {
    v1::CoordinatorMessage message;
    ASSERT_TRUE(stream->read(&message));
    ASSERT_TRUE(message.has_hosts_updated()) << message.DebugString();
    EXPECT_EQ(message.hosts_updated().added_slots(), 1);
  }
  EXPECT_EQ(added.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  for (auto& stream : streams) {
    ASSERT_TRUE(stream->goodbye());
    EXPECT_TRUE(stream->close().ok());
  }
  auto again0 = register_slot(client, 0, 0);
  auto again1 = register_slot(client, 1, 1);
  auto [status, response] = added.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.topology().rank(), 2);
  EXPECT_EQ(response.topology().size(), 3);
  EXPECT_TRUE(again0.get().first.ok());
  EXPECT_TRUE(again1.get().first.ok());
  server->shutdown();
}

}  // namespace
}  // namespace hvrun::coordinator
