// One user name submitted as different ops (negotiation_engine.h, step 11): the Python bindings'
// "<op>.<name>" makes two tensors of it, which must fail together once the ranks sit idle on
// them, while asynchronous patterns that pass through the same state are never refused.
#include <string>

#include "proto/collective_op_name.h"
#include "tests/coordinator/engine_sim.h"

namespace hvrun::coordinator {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace): test helpers

constexpr std::chrono::microseconds kGrace = std::chrono::seconds(2);

EngineOptions with_grace(int world_size) {
  EngineOptions options{world_size, 64 << 20, std::chrono::microseconds(1000), 1024};
  options.op_mismatch_grace = kGrace;
  return options;
}

v1::TensorRequest allgather(const std::string& name) {
  return request(name, v1::COLLECTIVE_OP_ALLGATHER, {4});
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(UserTensorName, TakesOffOnlyTheTensorsOwnOpPrefix) {
  EXPECT_EQ(user_tensor_name("allreduce.m", v1::COLLECTIVE_OP_ALLREDUCE), "m");
  EXPECT_EQ(user_tensor_name("allgather.noname.3", v1::COLLECTIVE_OP_ALLGATHER), "noname.3");
  EXPECT_EQ(user_tensor_name("allreduce.m", v1::COLLECTIVE_OP_ALLGATHER), "allreduce.m");
  EXPECT_EQ(user_tensor_name("m", v1::COLLECTIVE_OP_ALLREDUCE), "m");
  EXPECT_EQ(user_tensor_name("allreduce.", v1::COLLECTIVE_OP_ALLREDUCE), "allreduce.");
  EXPECT_EQ(user_tensor_name("allreducex.m", v1::COLLECTIVE_OP_ALLREDUCE), "allreducex.m");
}

TEST(OpMismatch, IdleRanksOnOneNameWithTwoOpsFailTogetherNamingEachRankAndOp) {
  Sim sim(with_grace(2));
  sim.submit(0, {allreduce("allreduce.m", {4})});
  sim.submit(1, {allgather("allgather.m")});
  sim.advance(std::chrono::milliseconds(1900));
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty()) << "declared before the grace";
  sim.advance(std::chrono::milliseconds(200));
  const std::vector<std::string> messages = sim.engine.fail_op_mismatches(sim.now);
  ASSERT_EQ(messages.size(), 1u);
  const std::string& message = messages[0];
  EXPECT_TRUE(contains(message, "the name 'm' was used for different collectives")) << message;
  EXPECT_TRUE(contains(message, "rank 0 submitted allreduce 'allreduce.m'")) << message;
  EXPECT_TRUE(contains(message, "rank 1 submitted allgather 'allgather.m'")) << message;
  sim.collect();
  const auto responses = sim.responses();
  ASSERT_EQ(responses.size(), 2u);
  for (const v1::Response& response : responses) {
    EXPECT_EQ(response.error(), message);
    EXPECT_EQ(response.error_ranks_size(), 0) << "every rank gets it";
  }
  EXPECT_EQ(sim.engine.in_flight_count(), 0u);
  // The name is free again: the next step's allreduce runs.
  sim.submit(0, {allreduce("allreduce.m", {4})});
  sim.submit(1, {allreduce("allreduce.m", {4})});
  sim.advance(std::chrono::milliseconds(2));
  ASSERT_EQ(sim.responses().size(), 3u);
  EXPECT_EQ(sim.responses().back().error(), "");
}

TEST(OpMismatch, ANameTheCApiGaveMeetsTheBindingsPrefixedOne) {
  Sim sim(with_grace(3));
  sim.submit(0, {allgather("m")});
  sim.submit(1, {allreduce("allreduce.m", {4})});
  sim.submit(2, {allreduce("allreduce.m", {4})});
  sim.advance(kGrace);
  const auto messages = sim.engine.fail_op_mismatches(sim.now);
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_TRUE(contains(messages[0], "rank 0 submitted allgather 'm'")) << messages[0];
  EXPECT_TRUE(contains(messages[0], "ranks 1-2 submitted allreduce 'allreduce.m'")) << messages[0];
}

// Legal: a rank has both ops in flight (asynchronously); its peer will follow.
TEST(OpMismatch, ARankWithBothOpsInFlightIsNeverRefused) {
  Sim sim(with_grace(2));
  sim.submit(0, {allreduce("allreduce.m", {4}), allgather("allgather.m")});
  sim.submit(1, {allgather("allgather.m")});
  sim.advance(10 * kGrace);
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty());
  sim.submit(1, {allreduce("allreduce.m", {4})});
  sim.advance(std::chrono::milliseconds(2));
  const auto responses = sim.responses();
  ASSERT_EQ(responses.size(), 2u);
  for (const auto& response : responses) EXPECT_EQ(response.error(), "");
}

// Legal: two asynchronous ops submitted in different orders pass through the mismatch's state
// (each rank has one op, not the other's) until their second submissions.
TEST(OpMismatch, TwoAsyncOpsInDifferentOrdersAreNeverRefused) {
  Sim sim(with_grace(2));
  sim.submit(0, {allreduce("allreduce.m", {4})});
  sim.submit(1, {allgather("allgather.m")});
  sim.advance(std::chrono::milliseconds(500));
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty());
  sim.submit(0, {allgather("allgather.m")});
  sim.submit(1, {allreduce("allreduce.m", {4})});
  sim.advance(10 * kGrace);
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty());
  ASSERT_EQ(sim.responses().size(), 2u);
  for (const auto& response : sim.responses()) EXPECT_EQ(response.error(), "");
}

// A rank still submitting (other tensors in flight, or anything new within the grace) may yet
// submit the other op: not a mismatch until it sits on this name alone.
TEST(OpMismatch, RanksThatAreNotIdleOnTheNameAloneAreNotRefused) {
  Sim sim(with_grace(2));
  sim.submit(0, {allreduce("allreduce.m", {4}), allreduce("allreduce.other", {4})});
  sim.submit(1, {allgather("allgather.m")});
  sim.advance(3 * kGrace);
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty()) << "rank 0 also waits on 'other'";
  sim.submit(1, {allreduce("allreduce.other", {4})});  // 'other' runs: rank 1 just submitted
  sim.advance(std::chrono::milliseconds(2));
  sim.advance(kGrace / 2);
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty()) << "rank 1 submitted within the grace";
  sim.advance(kGrace);
  EXPECT_EQ(sim.engine.fail_op_mismatches(sim.now).size(), 1u);
}

// Unnamed calls are counted per op by the bindings: allreduce's and barrier's "noname.0" are
// two calls that merely share a number (rank 1 may compute, then call the barrier).
TEST(OpMismatch, NamesTheBindingsGeneratedAreNeverOneName) {
  EXPECT_TRUE(is_generated_name("noname.0"));
  EXPECT_TRUE(is_generated_name("ps2.noname.7"));
  EXPECT_FALSE(is_generated_name("m"));
  EXPECT_FALSE(is_generated_name("ps.noname.1"));
  Sim sim(with_grace(2));
  sim.submit(0, {request("barrier.noname.0", v1::COLLECTIVE_OP_BARRIER, {})});
  sim.submit(1, {allreduce("allreduce.noname.0", {4})});
  sim.advance(10 * kGrace);
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty());
}

TEST(OpMismatch, GraceZeroNeverDeclaresOne) {
  Sim sim(2);  // op_mismatch_grace 0
  sim.submit(0, {allreduce("allreduce.m", {4})});
  sim.submit(1, {allgather("allgather.m")});
  sim.advance(std::chrono::hours(1));
  EXPECT_TRUE(sim.engine.fail_op_mismatches(sim.now).empty());
  EXPECT_EQ(sim.engine.in_flight_count(), 2u);
}

}  // namespace
}  // namespace hvrun::coordinator
