// InFlightTable: ops in flight by name, and the reuse of a name's last op once nothing else
// holds it (what keeps a training step's submissions from allocating).
#include <gtest/gtest.h>

#include <string>

#include "tests/worker/plan_entries.h"
#include "worker_lib/runtime/in_flight_table.h"
#include "worker_lib/agreement/request_cache.h"

namespace hvrun::detail {
namespace {

TEST(InFlightTable, AClaimedOpIsReusedOnlyOnceItAndItsHandleHaveNoOtherHolder) {
  InFlightTable table;
  std::shared_ptr<PendingOp> first = table.claim("grad.w");
  ASSERT_TRUE(first && first->handle);
  EXPECT_EQ(first->name(), "grad.w");
  EXPECT_TRUE(table.contains("grad.w"));
  EXPECT_EQ(table.size(), 1u);
  first->shape = {3, 4};
  first->prescale = 2.0;
  first->handle->complete(Status::ok());
  PendingOp* const address = first.get();
  std::shared_ptr<HandleState> caller = first->handle;  // the caller still holds its Handle

  ASSERT_EQ(table.take("grad.w", 0), first);  // executed
  EXPECT_FALSE(table.contains("grad.w"));
  EXPECT_TRUE(table.empty());
  first.reset();
  std::shared_ptr<PendingOp> second = table.claim("grad.w");
  EXPECT_NE(second.get(), address) << "reused while the caller still held the handle";
  EXPECT_FALSE(second->handle->done);
  const CacheEntry entry;
  second->cache_entry = &entry;  // found when a cached round took it
  table.remove(*second);
  EXPECT_FALSE(table.contains("grad.w"));

  caller.reset();
  PendingOp* const second_address = second.get();
  HandleState* const second_handle = second->handle.get();
  second->shape = {16};
  second->handle->joined_ranks = {1};
  second->handle->complete(invalid_argument("failed last time"));
  second.reset();
  std::shared_ptr<PendingOp> third = table.claim("grad.w");
  EXPECT_EQ(third.get(), second_address) << "nothing else held it: reused";
  EXPECT_EQ(third->handle.get(), second_handle);
  EXPECT_EQ(third->name(), "grad.w");
  EXPECT_TRUE(third->shape.empty());  // reset to a new op's fields
  EXPECT_EQ(third->prescale, 1.0);
  EXPECT_FALSE(third->handle->done);
  EXPECT_TRUE(third->handle->status.is_ok());
  EXPECT_TRUE(third->handle->joined_ranks.empty());
  EXPECT_EQ(third->cache_entry, &entry) << "the same name's cache entry is kept";
}

TEST(InFlightTable, RemovingAnOpNoLongerInFlightLeavesTheNamesNextOp) {
  InFlightTable table;
  std::shared_ptr<PendingOp> old = table.claim("grad.b");
  ASSERT_EQ(table.take_all().size(), 1u);  // the runtime's end failed it
  std::shared_ptr<PendingOp> next = table.claim("grad.b");
  ASSERT_NE(next, old) << "still held here: not reused";
  table.remove(*old);
  EXPECT_TRUE(table.contains("grad.b"));
  EXPECT_EQ(table.size(), 1u);
  ASSERT_EQ(table.take("grad.b", 0), next);
  table.remove(*next);  // taken already: nothing to do
  EXPECT_TRUE(table.empty());
}

TEST(InFlightTable, AddedOpsAreNotKeptAndANameInFlightIsRefused) {
  InFlightTable table;
  auto gather = plan_entries::op("gather", {2}, DataType::kFloat32, nullptr, nullptr);
  ASSERT_TRUE(table.add(gather));
  EXPECT_FALSE(table.add(plan_entries::op("gather", {2}, DataType::kFloat32, nullptr, nullptr)));
  EXPECT_EQ(table.take("gather", 1), nullptr) << "another process set's name is not this op";
  ASSERT_EQ(table.take("gather", 0), gather);
  std::weak_ptr<PendingOp> watch = gather;
  gather.reset();
  EXPECT_TRUE(watch.expired()) << "the table kept an added op (its handle may hold a large result)";
}

TEST(InFlightTable, TakeAllEmptiesIt) {
  InFlightTable table;
  table.claim("a");
  table.claim("b");
  ASSERT_TRUE(table.add(plan_entries::op("c", {1}, DataType::kFloat32, nullptr, nullptr)));
  EXPECT_EQ(table.take_all().size(), 3u);
  EXPECT_TRUE(table.empty());
  EXPECT_FALSE(table.contains("a"));
}

TEST(InFlightTable, NamesSeenOnceDoNotAccumulate) {
  InFlightTable table;
  std::shared_ptr<PendingOp> held = table.claim("kept.in.flight");
  for (int i = 0; i < 20000; ++i) {
    const std::string name = "generated." + std::to_string(i);
    table.remove(*table.claim(name));
  }
  EXPECT_TRUE(table.contains("kept.in.flight"));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_LE(table.slots(), 8192u);
}

}  // namespace
}  // namespace hvrun::detail
