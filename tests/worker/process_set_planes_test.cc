// ProcessSetPlanes::takes_part_in: which plans keep peers waiting for this rank. A rank that
// shuts down tears its data planes down when it skips such a plan (runtime.cc), so a plan it
// has no part in must not count: tearing down then fails a same-host peer still finishing a
// collective this rank completed: the coordinator's "rank 1 left the job" error for a peer's
// next call reaches the departing rank too, and moves nothing.
#include <gtest/gtest.h>

#include "worker_lib/runtime/process_set_planes.h"

namespace hvrun::detail {
namespace {

// Rank 1 of 4: a member of the global set only.
ProcessSetPlanes rank_1_of_4() {
  return ProcessSetPlanes(ProcessSetPlanes::Job{
      .rank = 1, .size = 4, .local_rank = 0, .hosts = {"h0", "h1", "h0", "h1"}});
}

v1::Response& add_allreduce(v1::Plan& plan, uint32_t process_set = 0) {
  v1::Response& response = *plan.add_responses();
  response.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
  response.set_dtype(v1::DATA_TYPE_FLOAT32);
  response.set_process_set_id(process_set);
  response.add_tensors()->set_name("p");
  return response;
}

TEST(ProcessSetPlanes, ACollectiveOfTheGlobalSetIsOneThisRankRuns) {
  ProcessSetPlanes planes = rank_1_of_4();
  v1::Plan plan;
  add_allreduce(plan);
  EXPECT_TRUE(planes.takes_part_in(plan));
}

TEST(ProcessSetPlanes, AnErrorResponseIsNoCollectiveThisRankRuns) {
  ProcessSetPlanes planes = rank_1_of_4();
  v1::Plan left;  // what rank 1 receives while it shuts down, after rank 0's next call
  add_allreduce(left).set_error("rank 1 left the job (shut down) without submitting allreduce "
                                "'p'; every rank must submit it, or call join() when it runs out "
                                "of data");
  EXPECT_FALSE(planes.takes_part_in(left));

  v1::Plan duplicate;  // a duplicate submission's error, for the ranks that sent it
  add_allreduce(duplicate).add_error_ranks(0);
  EXPECT_FALSE(planes.takes_part_in(duplicate));

  v1::Plan both;  // an error beside a collective: the collective counts
  add_allreduce(both).set_error("mismatched shapes");
  add_allreduce(both);
  EXPECT_TRUE(planes.takes_part_in(both));
}

TEST(ProcessSetPlanes, ACollectiveOfAnotherSetOnlyPassesThisRankBy) {
  ProcessSetPlanes planes = rank_1_of_4();
  ASSERT_TRUE(planes.add(1, {0, 2}).is_ok());  // not a member: no plane to connect
  v1::Plan plan;
  add_allreduce(plan, 1);
  EXPECT_FALSE(planes.takes_part_in(plan));
  add_allreduce(plan, 0);
  EXPECT_TRUE(planes.takes_part_in(plan));
}

}  // namespace
}  // namespace hvrun::detail
