// The response cache of the negotiation engine: ids, the cached path, metadata changes, capacity.
#include "tests/coordinator/engine_sim.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

// Ids by name from every response so far.
std::map<std::string, uint32_t> ids_of(const Sim& sim) {
  std::map<std::string, uint32_t> ids;
  for (const auto& response : sim.responses()) {
    for (const auto& t : response.tensors()) ids[t.name()] = t.cache_id();
  }
  return ids;
}

TEST(Cache, FirstNegotiationAssignsIdsAndCachedIdsNegotiateTheSame) {
  Sim sim(3);
  std::vector<v1::TensorRequest> full = {allreduce("a", {4}), allreduce("b", {2, 3}),
                                         request("bc", v1::COLLECTIVE_OP_BROADCAST, {5})};
  for (int r = 0; r < 3; ++r) sim.submit(r, full);
  auto ids = ids_of(sim);
  EXPECT_EQ(ids, (std::map<std::string, uint32_t>{{"a", 1}, {"b", 2}, {"bc", 3}}));
  const v1::Plan first = sim.plans.back();
  sim.plans.clear();

  for (int r = 0; r < 3; ++r) sim.submit(r, {cached(1), cached(2), cached(3)});
  ASSERT_EQ(sim.plans.size(), 1u);
  const v1::Plan& second = sim.plans[0];
  ASSERT_EQ(second.responses_size(), first.responses_size());
  // The same responses, but now every rank knows each tensor by its id: as_cached.
  for (int i = 0; i < second.responses_size(); ++i) {
    v1::Response a = first.responses(i), b = second.responses(i);
    for (v1::ResponseTensor& t : *a.mutable_tensors()) EXPECT_FALSE(t.as_cached()) << t.name();
    for (v1::ResponseTensor& t : *b.mutable_tensors()) {
      EXPECT_TRUE(t.as_cached()) << t.name();
      t.clear_as_cached();
    }
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString()) << "response " << i;
  }
}

// A tensor is as_cached only when its id was assigned by an earlier plan and the ranks sent the
// id (nothing changed); an allgather never is (its first dimensions differ per step).
TEST(Cache, OnlyTensorsKnownByTheirIdAreAsCached) {
  Sim sim(2);
  for (int r = 0; r < 2; ++r)
    sim.submit(r, {allreduce("a", {4}), request("g", v1::COLLECTIVE_OP_ALLGATHER, {2, 3})});
  auto ids = ids_of(sim);
  sim.plans.clear();
  sim.submit(0, {cached(ids["a"]), cached(ids["g"])});
  sim.submit(1, {cached(ids["a"]), cached(ids["g"])});
  ASSERT_EQ(sim.plans.size(), 1u);
  std::map<std::string, bool> as_cached;
  for (const v1::Response& r : sim.plans[0].responses())
    for (const v1::ResponseTensor& t : r.tensors()) as_cached[t.name()] = t.as_cached();
  EXPECT_EQ(as_cached, (std::map<std::string, bool>{{"a", true}, {"g", false}}));

  // Rank 0 sends "a" in full (same metadata): the reference is not the cache's, so the plan
  // restates it.
  sim.plans.clear();
  sim.submit(0, {allreduce("a", {4})});
  sim.submit(1, {cached(ids["a"])});
  ASSERT_EQ(sim.plans.size(), 1u);
  ASSERT_EQ(sim.plans[0].responses_size(), 1);
  EXPECT_EQ(sim.plans[0].responses(0).tensors(0).cache_id(), ids["a"]);
  EXPECT_FALSE(sim.plans[0].responses(0).tensors(0).as_cached());
}

TEST(Cache, PackedCachedIdsAreTheSameAsCachedRequests) {
  Sim sim(2);
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("a", {4}), allreduce("b", {4})});
  sim.plans.clear();
  v1::RequestBatch packed;
  packed.add_cached_ids(1);
  packed.add_cached_ids(2);
  ASSERT_TRUE(sim.engine.submit(0, packed, sim.now).is_ok());
  ASSERT_TRUE(sim.engine.submit(1, packed, sim.now).is_ok());
  sim.collect();
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).tensors_size(), 2);
  EXPECT_EQ(sim.plans[0].responses(0).tensors(1).cache_id(), 2u);
}

TEST(Cache, MixedCachedAndFullSubmissionsOfUnchangedMetadataAgree) {
  Sim sim(2);
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("a", {4})});
  sim.plans.clear();
  sim.submit(0, {cached(1)});
  sim.submit(1, {allreduce("a", {4})});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).error(), "");
  EXPECT_EQ(sim.plans[0].responses(0).tensors(0).cache_id(), 1u);
}

TEST(Cache, ChangedMetadataSentInFullReplacesTheEntryUnderTheSameId) {
  Sim sim(2);
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("a", {4})});
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("a", {6})});  // every rank changed it
  auto last = sim.plans.back().responses(0).tensors(0);
  EXPECT_EQ(last.cache_id(), 1u);
  EXPECT_EQ(last.shape(0), 6);
  sim.plans.clear();
  for (int r = 0; r < 2; ++r) sim.submit(r, {cached(1)});
  ASSERT_EQ(sim.plans.size(), 1u);
  EXPECT_EQ(sim.plans[0].responses(0).tensors(0).shape(0), 6) << "the id now means shape [6]";
  EXPECT_EQ(sim.engine.cache_size(), 1u);
}

TEST(Cache, OneRankChangingWhileOthersSendTheIdIsAMismatchError) {
  Sim sim(2);
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("a", {4})});
  sim.plans.clear();
  sim.submit(0, {cached(1)});
  sim.submit(1, {allreduce("a", {5})});
  ASSERT_EQ(sim.plans.size(), 1u);
  const auto& response = sim.plans[0].responses(0);
  EXPECT_NE(response.error().find("rank 0 sent allreduce float32 [4]"), std::string::npos)
      << response.error();
  EXPECT_NE(response.error().find("rank 1 sent allreduce float32 [5]"), std::string::npos)
      << response.error();
  EXPECT_EQ(response.tensors(0).cache_id(), 0u);
}

TEST(Cache, AllgatherRemembersEachRanksFirstDimension) {
  Sim sim(2);
  sim.submit(0, {request("g", v1::COLLECTIVE_OP_ALLGATHER, {2, 3})});
  sim.submit(1, {request("g", v1::COLLECTIVE_OP_ALLGATHER, {5, 3})});
  sim.plans.clear();
  sim.submit(0, {cached(1)});
  sim.submit(1, {request("g", v1::COLLECTIVE_OP_ALLGATHER, {7, 3})});  // rank 1's rows changed
  ASSERT_EQ(sim.plans.size(), 1u);
  const auto& t = sim.plans[0].responses(0).tensors(0);
  EXPECT_EQ(t.first_dims(0), 2);
  EXPECT_EQ(t.first_dims(1), 7);
  EXPECT_EQ(t.cache_id(), 1u);
}

TEST(Cache, AtCapacityNewTensorsGetNoIdAndStillNegotiate) {
  Sim sim(EngineOptions{2, 1 << 20, std::chrono::microseconds(1000), 2});
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("a", {1}), allreduce("b", {1}), allreduce("c", {1})});
  auto ids = ids_of(sim);
  EXPECT_EQ(ids["a"], 1u);
  EXPECT_EQ(ids["b"], 2u);
  EXPECT_EQ(ids["c"], 0u);
  sim.plans.clear();
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("c", {1})});
  EXPECT_EQ(ids_of(sim)["c"], 0u);
}

TEST(Cache, ZeroCapacityTurnsTheCacheOff) {
  Sim sim(EngineOptions{2, 1 << 20, std::chrono::microseconds(1000), 0});
  for (int r = 0; r < 2; ++r) sim.submit(r, {allreduce("a", {1})});
  EXPECT_EQ(ids_of(sim)["a"], 0u);
}

TEST(Cache, UnknownIdIsAProtocolError) {
  Sim sim(2);
  Status status = sim.engine.submit(0, batch_of({cached(9)}), sim.now);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cache id 9"), std::string::npos) << status.message();
}

TEST(Cache, SteadyStateRequestsCarryNoNamesOrShapes) {
  v1::RequestBatch steady;
  for (uint32_t id = 1; id <= 161; ++id) steady.add_cached_ids(id);
  // Packed varints: at most 2 bytes per id below 16384, plus the field's tag and length.
  EXPECT_LE(steady.ByteSizeLong(), 2u * 161 + 3);
}

}  // namespace
}  // namespace hvrun::coordinator
