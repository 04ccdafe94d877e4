// Readiness, ordering, determinism and fusion of the pure negotiation engine, with simulated
// ranks submitting in random orders (fixed seeds).
#include <algorithm>
#include <map>
#include <random>

#include <google/protobuf/util/message_differencer.h>

#include "tests/coordinator/engine_sim.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

// Every rank submits `tensors` allreduces in its own random order, one request per submit, the
// ranks interleaved at random. Returns every plan.
std::vector<v1::Plan> random_run(int world, int tensors, uint32_t seed, int64_t threshold) {
  Sim sim(world, threshold);
  std::mt19937 random(seed);
  std::vector<std::vector<int>> order(world);
  for (auto& o : order) {
    o.resize(tensors);
    std::iota(o.begin(), o.end(), 0);
    std::shuffle(o.begin(), o.end(), random);
  }
  std::vector<size_t> next(world, 0);
  std::vector<int> live(world);
  std::iota(live.begin(), live.end(), 0);
  while (!live.empty()) {
    const size_t pick = random() % live.size();
    const int rank = live[pick];
    const int t = order[rank][next[rank]++];
    sim.submit(rank, {allreduce("grad." + std::to_string(t), {t + 1})});
    if (next[rank] == static_cast<size_t>(tensors)) live.erase(live.begin() + pick);
    if (random() % 4 == 0) sim.advance(std::chrono::microseconds(random() % 700));
  }
  sim.advance(std::chrono::seconds(1));
  return sim.plans;
}

class ReadinessTest : public ::testing::TestWithParam<int> {};

TEST_P(ReadinessTest, EveryTensorRunsOnceWhenAllRanksSubmittedInAnyOrder) {
  const int world = GetParam();
  const int tensors = 20;
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto plans = random_run(world, tensors, seed, 1 << 20);
    std::map<std::string, int> seen;
    uint64_t last_seq = 0;
    for (const auto& plan : plans) {
      EXPECT_GT(plan.seq(), last_seq);
      last_seq = plan.seq();
      for (const auto& response : plan.responses()) {
        EXPECT_EQ(response.error(), "");
        EXPECT_EQ(response.contributing_ranks(), world);
        for (const auto& t : response.tensors()) ++seen[t.name()];
      }
    }
    ASSERT_EQ(seen.size(), static_cast<size_t>(tensors)) << "seed " << seed;
    for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name;
  }
}

TEST_P(ReadinessTest, SameInputsGiveTheSamePlans) {
  const int world = GetParam();
  const auto a = random_run(world, 15, 42, 200);
  const auto b = random_run(world, 15, 42, 200);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a[i], b[i])) << "plan " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ReadinessTest, ::testing::Values(1, 2, 3, 7, 16, 64));

TEST(Readiness, NotReadyUntilTheLastRankSubmits) {
  Sim sim(4);
  for (int r = 0; r < 3; ++r) sim.submit(r, {allreduce("x", {8})});
  sim.advance(std::chrono::seconds(10));
  EXPECT_TRUE(sim.plans.empty());
  EXPECT_EQ(sim.engine.in_flight_count(), 1u);
  sim.submit(3, {allreduce("x", {8})});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).tensors(0).name(), "x");
  EXPECT_EQ(sim.plans[0].responses(0).tensors(0).shape(0), 8);
  EXPECT_EQ(sim.engine.in_flight_count(), 0u);
}

TEST(Fusion, PacksReadyAllreducesUpToTheThresholdInSubmissionOrder) {
  Sim sim(2, /*threshold=*/1000);
  std::vector<v1::TensorRequest> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(allreduce("t" + std::to_string(i), {100}));  // 400 B
  batch.push_back(allreduce("big", {600}));                                                 // 2400 B
  sim.submit(0, batch);
  sim.submit(1, batch);
  ASSERT_EQ(sim.plans.size(), 1u);
  const auto& responses = sim.plans[0].responses();
  ASSERT_EQ(responses.size(), 4);
  std::vector<std::vector<std::string>> names;
  for (const auto& response : responses) {
    names.emplace_back();
    for (const auto& t : response.tensors()) names.back().push_back(t.name());
  }
  EXPECT_EQ(names, (std::vector<std::vector<std::string>>{
                       {"t0", "t1"}, {"t2", "t3"}, {"t4"}, {"big"}}));
}

// A reducescatter's scale factors reach the plan (the executors apply them), and only
// reducescatters with equal factors fuse.
TEST(Fusion, ReducescatterCarriesItsScaleFactors) {
  Sim sim(2, 1 << 20);
  auto half = request("rs.half", v1::COLLECTIVE_OP_REDUCESCATTER, {4});
  half.set_prescale(0.5);
  half.set_postscale(3);
  auto plain = request("rs.plain", v1::COLLECTIVE_OP_REDUCESCATTER, {4});
  sim.submit(0, {half, plain});
  sim.submit(1, {half, plain});
  ASSERT_EQ(sim.plans.size(), 1u);
  const auto& responses = sim.plans[0].responses();
  ASSERT_EQ(responses.size(), 2);
  EXPECT_EQ(responses[0].tensors(0).name(), "rs.half");
  EXPECT_EQ(responses[0].prescale(), 0.5);
  EXPECT_EQ(responses[0].postscale(), 3);
  EXPECT_EQ(responses[1].tensors(0).name(), "rs.plain");
  EXPECT_EQ(responses[1].prescale(), 1);
  EXPECT_EQ(responses[1].postscale(), 1);
}

TEST(Fusion, OnlyEqualDtypeAndScaleFuse_AndOtherOpsGoAlone) {
  Sim sim(2, 1 << 20);
  auto scaled = allreduce("scaled", {4});
  scaled.set_postscale(0.5);
  std::vector<v1::TensorRequest> batch = {
      allreduce("f32.a", {4}), allreduce("f64", {4}, v1::DATA_TYPE_FLOAT64),
      allreduce("f32.b", {4}), scaled,
      request("bcast", v1::COLLECTIVE_OP_BROADCAST, {4}),
      request("bcast2", v1::COLLECTIVE_OP_BROADCAST, {4})};
  sim.submit(0, batch);
  sim.submit(1, batch);
  ASSERT_EQ(sim.plans.size(), 1u);
  const auto& responses = sim.plans[0].responses();
  ASSERT_EQ(responses.size(), 5);
  EXPECT_EQ(responses[0].tensors_size(), 2);  // f32.a + f32.b
  EXPECT_EQ(responses[0].tensors(1).name(), "f32.b");
  EXPECT_EQ(responses[1].tensors(0).name(), "f64");
  EXPECT_EQ(responses[2].tensors(0).name(), "scaled");
  EXPECT_EQ(responses[2].postscale(), 0.5);
  EXPECT_EQ(responses[3].op(), v1::COLLECTIVE_OP_BROADCAST);
  EXPECT_EQ(responses[4].tensors_size(), 1);
}

TEST(Fusion, ZeroThresholdMeansOneTensorPerResponse) {
  Sim sim(2, /*threshold=*/0);
  std::vector<v1::TensorRequest> batch = {allreduce("a", {1}), allreduce("b", {1})};
  sim.submit(0, batch);
  sim.submit(1, batch);
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses_size(), 2);
}

TEST(CycleTime, LoneTensorIsAnsweredAtOnce) {
  Sim sim(2, 1 << 20, std::chrono::seconds(1));
  sim.submit(0, {allreduce("tiny", {1})});
  sim.submit(1, {allreduce("tiny", {1})});
  ASSERT_EQ(sim.plans.size(), 1u) << "a lone 4-byte allreduce must not wait for the cycle";
  EXPECT_FALSE(sim.engine.next_deadline().has_value());
}

TEST(CycleTime, ReadyTensorWaitsAtMostOneCycleForAPendingCompanion) {
  Sim sim(2, 1 << 20, std::chrono::milliseconds(5));
  sim.submit(0, {allreduce("a", {1}), allreduce("b", {1})});
  sim.submit(1, {allreduce("a", {1})});  // a ready; b pending on rank 1 and could join it
  EXPECT_TRUE(sim.plans.empty());
  ASSERT_TRUE(sim.engine.next_deadline().has_value());
  EXPECT_EQ(*sim.engine.next_deadline(), sim.now + std::chrono::milliseconds(5));
  sim.advance(std::chrono::milliseconds(4));
  EXPECT_TRUE(sim.plans.empty());
  sim.advance(std::chrono::milliseconds(1));
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).tensors_size(), 1);
  EXPECT_EQ(sim.plans[0].responses(0).tensors(0).name(), "a");
}

TEST(CycleTime, CompanionArrivingWithinTheCycleIsFused) {
  Sim sim(2, 1 << 20, std::chrono::milliseconds(5));
  sim.submit(0, {allreduce("a", {1}), allreduce("b", {1})});
  sim.submit(1, {allreduce("a", {1})});
  sim.advance(std::chrono::milliseconds(2));
  sim.submit(1, {allreduce("b", {1})});
  ASSERT_EQ(sim.plans.size(), 1u);
  ASSERT_EQ(sim.plans[0].responses_size(), 1);
  EXPECT_EQ(sim.plans[0].responses(0).tensors_size(), 2);
}

TEST(CycleTime, PendingTensorOfAnotherDtypeDoesNotHoldBack) {
  Sim sim(2, 1 << 20, std::chrono::seconds(1));
  sim.submit(0, {allreduce("a", {1}), allreduce("b", {1}, v1::DATA_TYPE_INT64)});
  sim.submit(1, {allreduce("a", {1})});
  ASSERT_EQ(sim.plans.size(), 1u);  // b cannot fuse with a, so a goes now
}

TEST(CycleTime, FullBufferGoesWithoutWaiting) {
  Sim sim(2, /*threshold=*/8, std::chrono::seconds(1));
  sim.submit(0, {allreduce("a", {2}), allreduce("b", {2})});
  sim.submit(1, {allreduce("a", {2})});  // 8 bytes ready: a full buffer
  ASSERT_EQ(sim.plans.size(), 1u);
}

TEST(Ops, AllgatherFirstDimsAlltoallMatrixReducescatterShapeAndBarrier) {
  Sim sim(3, 1 << 20);
  for (int r = 0; r < 3; ++r) {
    auto gather = request("gather", v1::COLLECTIVE_OP_ALLGATHER, {r + 1, 5});
    auto a2a = request("a2a", v1::COLLECTIVE_OP_ALLTOALL, {3 + r, 2});
    if (r == 1) {
      for (int64_t s : {4, 0, 0}) a2a.add_splits(s);
    }
    sim.submit(r, {gather, a2a, request("rs", v1::COLLECTIVE_OP_REDUCESCATTER, {7, 2}),
                   request("barrier.0", v1::COLLECTIVE_OP_BARRIER, {})});
  }
  auto responses = sim.responses();
  ASSERT_EQ(responses.size(), 4u);
  std::map<std::string, v1::Response> by_name;
  for (const auto& response : responses) by_name[response.tensors(0).name()] = response;
  const auto& gathered = by_name["gather"].tensors(0);
  EXPECT_EQ(std::vector<int64_t>(gathered.first_dims().begin(), gathered.first_dims().end()),
            (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(gathered.shape(1), 5);
  const auto& a2a = by_name["a2a"].tensors(0);
  EXPECT_EQ(std::vector<int64_t>(a2a.splits_matrix().begin(), a2a.splits_matrix().end()),
            (std::vector<int64_t>{1, 1, 1, 4, 0, 0, 2, 2, 1}));
  EXPECT_EQ(by_name["rs"].tensors(0).shape(0), 7);
  EXPECT_EQ(by_name["barrier.0"].op(), v1::COLLECTIVE_OP_BARRIER);
  for (const auto& response : responses) EXPECT_EQ(response.error(), "");
}

TEST(Ops, GroupedAllreduceWaitsForTheWholeGroupAndRunsAsOneResponse) {
  Sim sim(2, /*threshold=*/4);  // the group ignores the threshold
  auto member = [](const std::string& name) {
    auto r = allreduce(name, {4});
    r.set_group_id(7);
    r.set_group_size(2);
    return r;
  };
  sim.submit(0, {member("g.a"), member("g.b")});
  sim.submit(1, {member("g.a")});
  sim.advance(std::chrono::seconds(1));
  EXPECT_TRUE(sim.plans.empty());
  sim.submit(1, {member("g.b")});
  ASSERT_EQ(sim.plans.size(), 1u);
  ASSERT_EQ(sim.plans[0].responses_size(), 1);
  EXPECT_EQ(sim.plans[0].responses(0).tensors_size(), 2);
}

TEST(Ops, AGroupWithOneMismatchedMemberCompletesAtOnceAndItsNamesCanBeUsedAgain) {
  Sim sim(2);
  auto member = [](const std::string& name, int64_t length) {
    auto r = allreduce(name, {length});
    r.set_group_id(11);
    r.set_group_size(3);
    return r;
  };
  sim.submit(0, {member("g.a", 4), member("g.b", 4), member("g.c", 4)});
  sim.submit(1, {member("g.a", 4), member("g.b", 5), member("g.c", 4)});
  sim.advance(std::chrono::milliseconds(5));  // a few cycles, far less than any op timeout
  std::map<std::string, std::string> error_by_name;
  for (const v1::Response& response : sim.responses())
    for (const auto& t : response.tensors()) error_by_name[t.name()] = response.error();
  ASSERT_EQ(error_by_name.size(), 3u) << "every member must be answered";
  EXPECT_EQ(error_by_name["g.a"], "");
  EXPECT_EQ(error_by_name["g.c"], "");
  EXPECT_NE(error_by_name["g.b"].find("'g.b'"), std::string::npos) << error_by_name["g.b"];
  EXPECT_NE(error_by_name["g.b"].find("[5]"), std::string::npos) << error_by_name["g.b"];

  // Nothing stays in flight: the same names, now equal on both ranks, run as a group again.
  const size_t before = sim.plans.size();
  for (int rank : {0, 1}) sim.submit(rank, {member("g.a", 4), member("g.b", 4), member("g.c", 4)});
  sim.advance(std::chrono::milliseconds(5));
  int answered = 0;
  for (size_t p = before; p < sim.plans.size(); ++p)
    for (const v1::Response& response : sim.plans[p].responses()) {
      EXPECT_EQ(response.error(), "");
      answered += response.tensors_size();
    }
  EXPECT_EQ(answered, 3);
}

TEST(Ops, GroupMembersOfDifferentDtypesGetOneResponseEachInTheSamePlan) {
  Sim sim(2);
  auto member = [](const std::string& name, v1::DataType dtype) {
    auto r = allreduce(name, {3}, dtype);
    r.set_group_id(9);
    r.set_group_size(3);
    return r;
  };
  for (int rank : {0, 1})
    sim.submit(rank, {member("g.f", v1::DATA_TYPE_FLOAT32), member("g.i", v1::DATA_TYPE_INT64),
                      member("g.f2", v1::DATA_TYPE_FLOAT32)});
  ASSERT_EQ(sim.plans.size(), 1u);
  const v1::Plan& plan = sim.plans[0];
  ASSERT_EQ(plan.responses_size(), 2);
  for (const v1::Response& response : plan.responses()) {
    EXPECT_EQ(response.error(), "");
    for (const auto& t : response.tensors()) {
      const bool is_int = t.name() == "g.i";
      EXPECT_EQ(response.dtype(), is_int ? v1::DATA_TYPE_INT64 : v1::DATA_TYPE_FLOAT32) << t.name();
    }
  }
  EXPECT_EQ(plan.responses(0).tensors_size() + plan.responses(1).tensors_size(), 3);
}

}  // namespace
}  // namespace hvrun::coordinator
