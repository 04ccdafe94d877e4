// The coordinator's process sets: one engine per set, membership changes applied as the global
// set plans them, ranks numbered per set, errors and stalls naming the job's ranks.
#include "coordinator/service/process_set_engines.h"

#include <gtest/gtest.h>

#include "tests/coordinator/engine_sim.h"

namespace hvrun::coordinator::service {
namespace {

using coordinator::testing::allreduce;
using coordinator::testing::batch_of;
using coordinator::testing::cached;

v1::TensorRequest add_request(const std::string& name, std::vector<int64_t> members) {
  v1::TensorRequest r;
  r.set_name(name);
  r.set_op(v1::COLLECTIVE_OP_PROCESS_SET_ADD);
  for (int64_t m : members) r.add_splits(m);
  return r;
}

v1::TensorRequest remove_request(const std::string& name, uint32_t id) {
  v1::TensorRequest r;
  r.set_name(name);
  r.set_op(v1::COLLECTIVE_OP_PROCESS_SET_REMOVE);
  r.set_root_rank(static_cast<int32_t>(id));
  return r;
}

class ProcessSetEnginesTest : public ::testing::Test {
 protected:
  ProcessSetEnginesTest() : sets(EngineOptions{.world_size = 4}) {}

  void submit(int rank, uint32_t set, std::vector<v1::TensorRequest> requests) {
    v1::RequestBatch batch = batch_of(std::move(requests));
    batch.set_process_set_id(set);
    Status status = sets.submit(rank, batch, now);
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    collect();
  }
  void collect() {
    while (auto plan = sets.take_plan(now)) plans.push_back(std::move(*plan));
  }
  // Every rank adds `members`; returns the id the plan gave the set.
  uint32_t add(const std::string& name, std::vector<int64_t> members) {
    for (int r = 0; r < 4; ++r) submit(r, 0, {add_request(name, members)});
    const v1::Response& response = plans.back().responses(0);
    EXPECT_EQ(response.op(), v1::COLLECTIVE_OP_PROCESS_SET_ADD);
    EXPECT_TRUE(response.error().empty()) << response.error();
    return response.created_process_set_id();
  }

  ProcessSetEngines sets;
  NegotiationEngine::TimePoint now{};
  std::vector<v1::Plan> plans;
};

TEST_F(ProcessSetEnginesTest, AddedSetsNegotiateAmongTheirMembersOnly) {
  const uint32_t even = add("ps.add.1", {0, 2});
  const uint32_t odd = add("ps.add.2", {1, 3});
  EXPECT_EQ(even, 1u);
  EXPECT_EQ(odd, 2u);
  ASSERT_EQ(plans.back().responses(0).process_set_members_size(), 2);
  EXPECT_EQ(plans.back().responses(0).process_set_members(1), 3);

  const size_t before = plans.size();
  submit(0, even, {allreduce("g", {4})});
  submit(1, odd, {allreduce("g", {8})});  // the same name in another set is another tensor
  EXPECT_EQ(plans.size(), before);
  submit(2, even, {allreduce("g", {4})});
  ASSERT_EQ(plans.size(), before + 1);
  const v1::Response& on_even = plans.back().responses(0);
  EXPECT_EQ(on_even.process_set_id(), even);
  EXPECT_EQ(on_even.tensors(0).shape(0), 4);
  EXPECT_EQ(on_even.contributing_ranks(), 2);
  submit(3, odd, {allreduce("g", {8})});
  ASSERT_EQ(plans.size(), before + 2);
  EXPECT_EQ(plans.back().responses(0).process_set_id(), odd);
  // The job's plans are numbered once, across sets.
  for (size_t i = 0; i < plans.size(); ++i) EXPECT_EQ(plans[i].seq(), i + 1);

  // Each set has its own cache ids: both sets' "g" got id 1 and run again by id.
  EXPECT_EQ(on_even.tensors(0).cache_id(), 1u);
  submit(0, even, {cached(1)});
  submit(2, even, {cached(1)});
  EXPECT_EQ(plans.back().responses(0).process_set_id(), even);
}

TEST_F(ProcessSetEnginesTest, ARankOutsideTheSetOrAnUnknownSetBreaksTheProtocol) {
  const uint32_t even = add("ps.add.1", {0, 2});
  v1::RequestBatch batch = batch_of({allreduce("x", {1})});
  batch.set_process_set_id(even);
  Status outside = sets.submit(1, batch, now);
  EXPECT_FALSE(outside.is_ok());
  EXPECT_NE(outside.message().find("not a member"), std::string::npos) << outside.message();
  batch.set_process_set_id(7);
  Status unknown = sets.submit(0, batch, now);
  EXPECT_NE(unknown.message().find("process set 7"), std::string::npos) << unknown.message();
}

TEST_F(ProcessSetEnginesTest, MismatchesNameTheJobsRanks) {
  const uint32_t set = add("ps.add.1", {1, 3});
  submit(1, set, {allreduce("w", {4})});
  submit(3, set, {allreduce("w", {5})});
  const v1::Response& response = plans.back().responses(0);
  EXPECT_NE(response.error().find("rank 1 sent allreduce float32 [4]"), std::string::npos)
      << response.error();
  EXPECT_NE(response.error().find("rank 3 sent allreduce float32 [5]"), std::string::npos)
      << response.error();
}

TEST_F(ProcessSetEnginesTest, BadMembersFailTheAdditionOnEveryRank) {
  for (int r = 0; r < 4; ++r) submit(r, 0, {add_request("ps.add.1", {0, 9})});
  EXPECT_NE(plans.back().responses(0).error().find("rank 9 is not in the job"), std::string::npos);
  EXPECT_EQ(plans.back().responses(0).created_process_set_id(), 0u);
  add("ps.add.2", {0, 1});
  for (int r = 0; r < 4; ++r) submit(r, 0, {add_request("ps.add.3", {0, 1})});
  EXPECT_NE(plans.back().responses(0).error().find("already has exactly these ranks"),
            std::string::npos);
  // Ranks that disagree on the members get the engine's mismatch error.
  submit(0, 0, {add_request("ps.add.4", {2, 3})});
  submit(1, 0, {add_request("ps.add.4", {1, 3})});
  submit(2, 0, {add_request("ps.add.4", {2, 3})});
  submit(3, 0, {add_request("ps.add.4", {2, 3})});
  EXPECT_NE(plans.back().responses(0).error().find("rank 1 sent add_process_set ranks [1, 3]"),
            std::string::npos)
      << plans.back().responses(0).error();
  EXPECT_EQ(sets.set_count(), 2u);
}

TEST_F(ProcessSetEnginesTest, RemovalWaitsForNothingAndRefusesASetStillInUse) {
  const uint32_t set = add("ps.add.1", {0, 1});
  submit(0, set, {allreduce("busy", {1})});
  for (int r = 0; r < 4; ++r) submit(r, 0, {remove_request("ps.remove.1", set)});
  EXPECT_NE(plans.back().responses(0).error().find("still in flight"), std::string::npos)
      << plans.back().responses(0).error();
  submit(1, set, {allreduce("busy", {1})});
  for (int r = 0; r < 4; ++r) submit(r, 0, {remove_request("ps.remove.2", set)});
  EXPECT_TRUE(plans.back().responses(0).error().empty()) << plans.back().responses(0).error();
  EXPECT_EQ(sets.set_count(), 1u);
  v1::RequestBatch batch = batch_of({allreduce("late", {1})});
  batch.set_process_set_id(set);
  EXPECT_FALSE(sets.submit(0, batch, now).is_ok()) << "a removed set's id is refused";
  for (int r = 0; r < 4; ++r) submit(r, 0, {remove_request("ps.remove.3", 0)});
  EXPECT_NE(plans.back().responses(0).error().find("global process set cannot be removed"),
            std::string::npos);
  EXPECT_EQ(add("ps.add.2", {0, 1}), set + 1) << "ids are never reused";
}

TEST_F(ProcessSetEnginesTest, StallsNameTheSetAndTheJobsRanks) {
  const uint32_t set = add("ps.add.1", {1, 2, 3});
  submit(2, set, {allreduce("slow", {1})});
  now += std::chrono::seconds(5);
  auto stalls = sets.stalled_tensors(now, std::chrono::seconds(1));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].process_set_id, set);
  EXPECT_EQ(stalls[0].missing_ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(stalls[0].submitted_ranks, (std::vector<int>{2}));
  EXPECT_NE(describe_stall(stalls[0]).find("'slow' on process set 1"), std::string::npos)
      << describe_stall(stalls[0]);
}

TEST_F(ProcessSetEnginesTest, ADepartedRankFailsWhatItsSetsStillWaitFor) {
  const uint32_t set = add("ps.add.1", {0, 3});
  submit(0, set, {allreduce("w", {1})});
  sets.rank_departed(3, now);
  collect();
  EXPECT_NE(plans.back().responses(0).error().find("rank 3 left the job"), std::string::npos)
      << plans.back().responses(0).error();
}

}  // namespace
}  // namespace hvrun::coordinator::service
