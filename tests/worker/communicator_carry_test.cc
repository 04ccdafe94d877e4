// Rank 0's choice between shrinking the last membership's GPU communicator and making a new one
// (backends/nccl/communicator_carry.h), and the slot that carries a plane across a reset.
#include "worker_lib/backends/nccl/communicator_carry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hvrun::detail {
namespace {

std::string held(const std::string& tag, int rank, int size) {
  return held_text({.tag = tag, .rank = rank, .size = size}, "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CommunicatorRebuild, SurvivorsInTheirOldOrderShrinkWithoutTheRanksThatLeft) {
  std::vector<std::string> posted{held("t", 0, 4), held("t", 2, 4)};
  RebuildChoice c = choose_rebuild(posted);
  ASSERT_TRUE(c.shrink) << c.how;
  EXPECT_EQ(c.excluded, (std::vector<int>{1, 3}));
  EXPECT_EQ(c.how, "shrink of the last membership's 4-rank communicator without rank(s) 1,3");
  EXPECT_EQ(parse_shrink_answer(shrink_answer(c.excluded)), c.excluded);
}

TEST(CommunicatorRebuild, NoCommunicatorAnywhereIsAFirstInit) {
  std::vector<std::string> posted{held_text({}, ""), held_text({}, "")};
  RebuildChoice c = choose_rebuild(posted);
  EXPECT_FALSE(c.shrink);
  EXPECT_EQ(c.how, "init (a new unique id): no rank holds a communicator of an earlier membership");
}

TEST(CommunicatorRebuild, ARankThatJoinedNeedsInit) {
  std::vector<std::string> posted{held("t", 0, 2), held("t", 1, 2), held_text({}, "")};
  RebuildChoice c = choose_rebuild(posted);
  EXPECT_FALSE(c.shrink);
  EXPECT_TRUE(contains(c.how, "after an elastic reset: rank 2 joined")) << c.how;
}

TEST(CommunicatorRebuild, APlaneThatCannotShrinkSaysWhy) {
  std::vector<std::string> posted{held_text({}, "this NCCL (2.26.2) has no ncclCommRevoke"),
                                  held_text({}, "this NCCL (2.26.2) has no ncclCommRevoke")};
  RebuildChoice c = choose_rebuild(posted);
  EXPECT_FALSE(c.shrink);
  EXPECT_TRUE(contains(c.how, "rank 0 kept no communicator: this NCCL (2.26.2) has no ncclCommRevoke")) << c.how;
}

TEST(CommunicatorRebuild, RanksOutOfTheirOldOrderOrFromAnotherCommunicatorNeedInit) {
  std::vector<std::string> swapped{held("t", 1, 3), held("t", 0, 3)};
  RebuildChoice c = choose_rebuild(swapped);
  EXPECT_FALSE(c.shrink);
  EXPECT_TRUE(contains(c.how, "old order")) << c.how;
  std::vector<std::string> other{held("t", 0, 3), held("u", 1, 3)};
  c = choose_rebuild(other);
  EXPECT_FALSE(c.shrink);
  EXPECT_TRUE(contains(c.how, "rank 1 holds another communicator than rank 0")) << c.how;
}

TEST(CommunicatorRebuild, TagsAgreeAcrossRanksAndDifferPerShrink) {
  EXPECT_EQ(lineage_tag_of_init("id"), lineage_tag_of_init("id"));
  std::vector<int> one{1}, two{2};
  EXPECT_NE(lineage_tag_of_shrink("t", one), lineage_tag_of_shrink("t", two));
  EXPECT_FALSE(parse_shrink_answer("id:xyz").has_value());
  EXPECT_FALSE(parse_shrink_answer("shrink:1,x").has_value());
}

TEST(CommunicatorCarry, WhatIsParkedIsTakenOnce) {
  carry_communicator({.lineage = {.tag = "t", .rank = 1, .size = 2}, .why_not = "why"});
  auto taken = take_carried_communicator();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->why_not, "why");
  EXPECT_EQ(taken->lineage.rank, 1);
  EXPECT_FALSE(take_carried_communicator().has_value());
}

}  // namespace
}  // namespace hvrun::detail
