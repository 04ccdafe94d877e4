// Validation errors, duplicates, join and departure in the negotiation engine.
#include <algorithm>
#include <functional>

#include "tests/coordinator/engine_sim.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct MismatchCase {
  const char* what;
  std::function<void(v1::TensorRequest&)> change;  // applied to rank 1's request
  const char* rank1_sent;                          // part of the message about rank 1
};

void PrintTo(const MismatchCase& c, std::ostream* out) { *out << c.what; }

class MismatchTest : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(MismatchTest, ErrorOnEveryRankNamingEachRankAndWhatItSent) {
  const auto& c = GetParam();
  Sim sim(3);
  auto base = allreduce("w", {4, 2});
  auto changed = base;
  c.change(changed);
  sim.submit(0, {base});
  sim.submit(1, {changed});
  sim.submit(2, {base});
  ASSERT_EQ(sim.plans.size(), 1u) << c.what;
  const auto& response = sim.plans[0].responses(0);
  EXPECT_EQ(response.tensors(0).name(), "w");
  EXPECT_EQ(response.error_ranks_size(), 0) << "a mismatch fails the tensor on every rank";
  EXPECT_TRUE(contains(response.error(), "ranks 0, 2 sent allreduce float32 [4, 2] sum"))
      << response.error();
  const auto rank1 = response.error().find("rank 1 sent ");
  ASSERT_NE(rank1, std::string::npos) << response.error();
  EXPECT_TRUE(contains(response.error().substr(rank1), c.rank1_sent))
      << c.what << ": " << response.error();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, MismatchTest,
    ::testing::Values(
        MismatchCase{"dtype", [](auto& r) { r.set_dtype(v1::DATA_TYPE_FLOAT64); },
                     "allreduce float64 [4, 2]"},
        MismatchCase{"shape", [](auto& r) { r.set_shape(1, 3); }, "allreduce float32 [4, 3]"},
        MismatchCase{"op", [](auto& r) { r.set_op(v1::COLLECTIVE_OP_ALLGATHER); },
                     "allgather float32 [4, 2]"},
        MismatchCase{"reduce op", [](auto& r) { r.set_reduce_op(v1::REDUCE_OP_MAX); },
                     "allreduce float32 [4, 2] max"},
        MismatchCase{"prescale", [](auto& r) { r.set_prescale(2); }, "prescale 2"},
        MismatchCase{"postscale", [](auto& r) { r.set_postscale(0.25); }, "postscale 0.25"}),
    [](const auto& test_info) {
      std::string name = test_info.param.what;
      std::replace(name.begin(), name.end(), ' ', '_');
      return name;
    });

TEST(Mismatch, BroadcastRootDiffers) {
  Sim sim(2);
  auto a = request("p", v1::COLLECTIVE_OP_BROADCAST, {3});
  auto b = a;
  b.set_root_rank(1);
  sim.submit(0, {a});
  sim.submit(1, {b});
  const auto& error = sim.plans.at(0).responses(0).error();
  EXPECT_TRUE(contains(error, "rank 0 sent broadcast float32 [3] root 0")) << error;
  EXPECT_TRUE(contains(error, "rank 1 sent broadcast float32 [3] root 1")) << error;
}

TEST(Mismatch, AllgatherMayDifferInTheFirstDimensionOnly) {
  Sim sim(2);
  sim.submit(0, {request("g", v1::COLLECTIVE_OP_ALLGATHER, {2, 3})});
  sim.submit(1, {request("g", v1::COLLECTIVE_OP_ALLGATHER, {9, 4})});
  const auto& error = sim.plans.at(0).responses(0).error();
  EXPECT_TRUE(contains(error, "[9, 4]")) << error;
}

TEST(Mismatch, BadRootAndBadSplitsFailTheTensor) {
  Sim sim(2);
  auto bcast = request("p", v1::COLLECTIVE_OP_BROADCAST, {3});
  bcast.set_root_rank(5);
  auto a2a = request("x", v1::COLLECTIVE_OP_ALLTOALL, {4});
  a2a.add_splits(1);
  sim.submit(0, {bcast, a2a});
  sim.submit(1, {bcast, a2a});
  auto responses = sim.responses();
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_TRUE(contains(responses[0].error(), "root rank 5")) << responses[0].error();
  EXPECT_TRUE(contains(responses[1].error(), "1 splits")) << responses[1].error();
}

TEST(Duplicate, SecondSubmissionWhileInFlightFailsOnlyForThatRank) {
  Sim sim(2);
  sim.submit(0, {allreduce("x", {1})});
  sim.submit(0, {allreduce("x", {1})});
  ASSERT_EQ(sim.plans.size(), 1u);
  const auto& dup = sim.plans[0].responses(0);
  EXPECT_EQ(std::vector<int>(dup.error_ranks().begin(), dup.error_ranks().end()),
            std::vector<int>{0});
  EXPECT_TRUE(contains(dup.error(), "rank 0 submitted tensor 'x' again")) << dup.error();
  sim.submit(1, {allreduce("x", {1})});  // the first submission is still in flight and completes
  ASSERT_EQ(sim.plans.size(), 2u);
  EXPECT_EQ(sim.plans[1].responses(0).error(), "");
}

TEST(Duplicate, CachedIdTwiceIsADuplicateToo) {
  Sim sim(2);
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("x", {1})});
  sim.plans.clear();
  sim.submit(0, {cached(1), cached(1)});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).error_ranks(0), 0);
}

TEST(Join, TensorsRunWithoutJoinedRanksAndTheLastJoinerIsReported) {
  Sim sim(3);
  sim.submit(2, {join_request()});
  sim.submit(0, {allreduce("x", {4})});
  sim.submit(1, {allreduce("x", {4})});
  ASSERT_EQ(sim.plans.size(), 1u);
  const auto& response = sim.plans[0].responses(0);
  EXPECT_EQ(response.error(), "");
  EXPECT_EQ(std::vector<int>(response.joined_ranks().begin(), response.joined_ranks().end()),
            std::vector<int>{2});
  EXPECT_EQ(response.contributing_ranks(), 2);
  EXPECT_EQ(response.tensors(0).shape(0), 4);

  sim.submit(1, {join_request()});
  sim.submit(0, {join_request()});
  ASSERT_EQ(sim.plans.size(), 2u);
  const auto& done = sim.plans[1].responses(0);
  EXPECT_EQ(done.op(), v1::COLLECTIVE_OP_JOIN);
  EXPECT_EQ(done.tensors(0).name(), "join");
  EXPECT_EQ(done.last_joined_rank(), 0);

  // The join state resets: a new round needs every rank again.
  sim.submit(0, {allreduce("y", {1})});
  EXPECT_EQ(sim.plans.size(), 2u);
}

// A rank whose request reaches the coordinator after its own join (the API forbids it; a worker
// once sent a cached allreduce and its join in one batch, join first) gets an error for that
// request; the tensor already decided without it is not counted twice.
TEST(Join, ARequestArrivingAfterItsRanksJoinFailsForThatRankOnly) {
  Sim sim(3);
  for (int r = 0; r < 3; ++r) sim.submit(r, {allreduce("x", {4})});  // x gets cache id 1
  ASSERT_EQ(sim.plans.size(), 1u);
  const uint32_t id = sim.plans[0].responses(0).tensors(0).cache_id();
  ASSERT_NE(id, 0u);
  // Cycle time is 1 ms and the Sim's clock stands still: a second allreduce of the same fusion
  // key, still waiting, keeps x in the ready list when rank 1's late request comes.
  sim.submit(1, {join_request()});
  sim.submit(0, {cached(id), allreduce("z", {2})});
  sim.submit(2, {cached(id)});
  sim.submit(1, {cached(id)});  // late: after rank 1's join
  sim.submit(2, {allreduce("z", {2})});
  sim.submit(0, {join_request()});
  sim.submit(2, {join_request()});
  bool late_error = false;
  int x_runs = 0;
  for (size_t p = 1; p < sim.plans.size(); ++p) {
    for (const auto& response : sim.plans[p].responses()) {
      if (response.tensors_size() == 0 || response.tensors(0).name() != "x") continue;
      if (!response.error().empty()) {
        EXPECT_EQ(std::vector<int>(response.error_ranks().begin(), response.error_ranks().end()),
                  std::vector<int>{1});
        EXPECT_TRUE(contains(response.error(), "after it called join()")) << response.error();
        late_error = true;
      } else {
        ++x_runs;
        EXPECT_EQ(response.contributing_ranks(), 2);
      }
    }
  }
  EXPECT_TRUE(late_error);
  EXPECT_EQ(x_runs, 1);
}

// --join-average all (Horovod's behaviour): Average divides by every rank, joined or not.
TEST(Join, JoinAverageAllCountsEveryRankAsContributing) {
  EngineOptions options{3, 64 << 20, std::chrono::microseconds(1000), 1024};
  options.join_average_all = true;
  Sim sim(options);
  sim.submit(2, {join_request()});
  sim.submit(0, {allreduce("x", {4})});
  sim.submit(1, {allreduce("x", {4})});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).contributing_ranks(), 3);
  EXPECT_EQ(sim.plans[0].responses(0).joined_ranks(0), 2);
}

TEST(Join, JoiningMakesWaitingTensorsReady) {
  Sim sim(2);
  sim.submit(0, {allreduce("x", {4})});
  sim.submit(1, {join_request()});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).contributing_ranks(), 1);
  EXPECT_EQ(sim.plans[0].responses(0).joined_ranks(0), 1);
}

TEST(Join, BroadcastFromAJoinedRootFails) {
  Sim sim(2);
  sim.submit(0, {join_request()});
  sim.submit(1, {request("p", v1::COLLECTIVE_OP_BROADCAST, {3})});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_TRUE(contains(sim.plans[0].responses(0).error(), "root rank 0")) << sim.plans[0].responses(0).error();
}

TEST(Join, BroadcastWithAnOutOfRangeRootAfterAJoinFailsCleanly) {
  Sim sim(2);
  sim.submit(0, {join_request()});
  auto bcast = request("p", v1::COLLECTIVE_OP_BROADCAST, {3});
  bcast.set_root_rank(1000);
  sim.submit(1, {bcast});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_TRUE(contains(sim.plans[0].responses(0).error(), "root rank 1000"));
}

TEST(Join, AllgatherGivesJoinedRanksZeroRows) {
  Sim sim(2);
  sim.submit(1, {join_request()});
  sim.submit(0, {request("g", v1::COLLECTIVE_OP_ALLGATHER, {3, 2})});
  const auto& t = sim.plans.at(0).responses(0).tensors(0);
  EXPECT_EQ(t.first_dims(0), 3);
  EXPECT_EQ(t.first_dims(1), 0);
}

TEST(Departure, TensorsWaitingForARankThatLeftFail) {
  Sim sim(2);
  sim.submit(0, {allreduce("x", {4})});
  sim.engine.rank_departed(1, sim.now);
  sim.collect();
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_TRUE(contains(sim.plans[0].responses(0).error(), "rank 1 left the job"))
      << sim.plans[0].responses(0).error();
  sim.submit(0, {allreduce("z", {4})});  // later tensors fail at once instead of hanging
  ASSERT_EQ(sim.plans.size(), 2u);
  EXPECT_NE(sim.plans[1].responses(0).error(), "");
}

TEST(Departure, ATensorSubmittedByARankThatLeftBeforeTheOthersFails) {
  // The departed rank's request was cancelled by its shutdown(): planning the tensor would have
  // the others run a collective it never joins (they would wait until their op timeout).
  Sim sim(2);
  sim.submit(0, {allreduce("x", {4})});
  sim.engine.rank_departed(0, sim.now);
  sim.collect();
  ASSERT_EQ(sim.plans.size(), 1u);  // failed at once, for every rank
  EXPECT_TRUE(contains(sim.plans[0].responses(0).error(), "rank 0 left the job (shut down) after submitting"))
      << sim.plans[0].responses(0).error();
  sim.submit(1, {allreduce("x", {4})});  // rank 1's own request, arriving later, fails too
  ASSERT_EQ(sim.plans.size(), 2u);
  EXPECT_TRUE(contains(sim.plans[1].responses(0).error(), "rank 0 left the job"))
      << sim.plans[1].responses(0).error();
}

// The rank that left is the cause of the others' failed collective, whichever came first: its
// goodbye, or their submissions.
TEST(Departure, EachFailureNamesTheRankThatLeftAndTheRanksLeftWaiting) {
  Sim sim(3);
  sim.submit(0, {allreduce("x", {4})});
  sim.submit(2, {allreduce("x", {4})});
  EXPECT_TRUE(sim.engine.take_departure_failures().empty());
  sim.engine.rank_departed(1, sim.now);
  std::vector<DepartureFailure> failures = sim.engine.take_departure_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rank, 1);
  EXPECT_TRUE(contains(failures[0].message,
                       "rank 1 left the job (shut down) without submitting allreduce 'x', which "
                       "ranks 0, 2 wait for"))
      << failures[0].message;
  EXPECT_TRUE(sim.engine.take_departure_failures().empty()) << "taken once";
  sim.submit(2, {allreduce("later", {4})});
  failures = sim.engine.take_departure_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].rank, 1);
  EXPECT_TRUE(contains(failures[0].message, "allreduce 'later', which rank 2 waits for"))
      << failures[0].message;
}

TEST(Stall, ReportsTensorsWaitingLongWithTheMissingRanks) {
  Sim sim(4);
  sim.submit(0, {allreduce("old", {1})});
  sim.submit(2, {allreduce("old", {1})});
  sim.submit(3, {join_request()});
  sim.advance(std::chrono::seconds(30));
  sim.submit(0, {allreduce("new", {1})});
  auto stalls = sim.engine.stalled_tensors(sim.now, std::chrono::seconds(20));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].name, "old");
  EXPECT_EQ(stalls[0].missing_ranks, std::vector<int>{1});  // rank 3 joined: not missing
  EXPECT_EQ(stalls[0].submitted_ranks, (std::vector<int>{0, 2}));
  const std::string text = describe_stall(stalls[0]);
  EXPECT_TRUE(contains(text, "allreduce 'old' has waited 30 s for rank 1 (submitted by ranks 0, 2)"))
      << text;
  EXPECT_EQ(sim.engine.stalled_tensors(sim.now, std::chrono::seconds(0)).size(), 2u);
}

// A model of hundreds of tensors, a job of hundreds of missing ranks: the report describes a
// few of each and counts the rest, all missing ranks still named up front.
TEST(Stall, TheReportOfManyTensorsAndRanksDescribesAFewAndCountsTheRest) {
  std::vector<StalledTensor> stalls;
  for (int t = 0; t < 161; ++t) {
    StalledTensor stall;
    stall.name = "grad." + std::to_string(t);
    stall.op = v1::COLLECTIVE_OP_ALLREDUCE;
    stall.waited = std::chrono::seconds(2);
    for (int r = 0; r < 20; ++r) stall.missing_ranks.push_back(r);
    stall.submitted_ranks = {20, 21};
    stalls.push_back(stall);
  }
  const std::string text = describe_stalls(stalls, nullptr);
  EXPECT_TRUE(contains(text, "ranks 0-19 have not submitted what the other ranks wait for")) << text;
  EXPECT_TRUE(contains(text, "; rank 7 has not submitted allreduce 'grad.0' (waited 2 s")) << text;
  EXPECT_FALSE(contains(text, "; rank 8 has not submitted")) << text;
  EXPECT_TRUE(contains(text, "; 12 more of those ranks likewise")) << text;
  EXPECT_TRUE(contains(text, "'grad.4'")) << text;
  EXPECT_FALSE(contains(text, "'grad.5'")) << text;
  EXPECT_TRUE(contains(text, ", and 156 more (161 in all)")) << text;
  EXPECT_LT(text.size(), 4000u) << text;
}

TEST(Protocol, RequestsWithoutNameOrOpOrFromBadRanksAreRejected) {
  Sim sim(2);
  v1::TensorRequest nameless = allreduce("", {1});
  EXPECT_EQ(sim.engine.submit(0, batch_of({nameless}), sim.now).code(), StatusCode::kInvalidArgument);
  v1::TensorRequest opless = allreduce("x", {1});
  opless.set_op(v1::COLLECTIVE_OP_UNSPECIFIED);
  EXPECT_EQ(sim.engine.submit(0, batch_of({opless}), sim.now).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sim.engine.submit(2, batch_of({allreduce("x", {1})}), sim.now).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hvrun::coordinator
