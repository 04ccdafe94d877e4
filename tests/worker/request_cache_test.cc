// RequestCache: the ids the coordinator assigned, and the fast-path metadata each entry keeps
// inline (dtype, reduce op, scales, shape) that a call must match for its id to stand.
#include <gtest/gtest.h>

#include "tests/worker/plan_entries.h"
#include "worker_lib/agreement/request_cache.h"

namespace hvrun::detail {
namespace {

std::shared_ptr<PendingOp> allreduce(const std::string& name, std::vector<int64_t> shape) {
  auto op = plan_entries::op(name, std::move(shape), DataType::kFloat32, nullptr, nullptr);
  op->op = v1::COLLECTIVE_OP_ALLREDUCE;
  op->reduce_op = ReduceOp::kAverage;
  op->prescale = 0.5;
  return op;
}

// What the coordinator's response assigning `id` to each op does to this rank's cache.
void assign(RequestCache& cache, const std::vector<std::shared_ptr<PendingOp>>& ops, uint32_t first_id) {
  v1::Response response;
  for (size_t i = 0; i < ops.size(); ++i) {
    v1::ResponseTensor* t = response.add_tensors();
    t->set_name(ops[i]->name());
    t->set_cache_id(first_id + static_cast<uint32_t>(i));
  }
  cache.remember(response, ops);
}

TEST(RequestCache, AnEntryStandsForTheSameMetadataOnlyWhateverTheShapesRank) {
  // Up to four dimensions are held inline, longer shapes whole.
  const std::vector<std::vector<int64_t>> shapes = {{}, {7}, {3, 5}, {2, 3, 4}, {64, 3, 7, 7},
                                                    {2, 2, 2, 2, 2}, {1, 2, 3, 4, 5, 6}};
  RequestCache cache;
  std::vector<std::shared_ptr<PendingOp>> ops;
  for (size_t i = 0; i < shapes.size(); ++i)
    ops.push_back(allreduce("t" + std::to_string(i), shapes[i]));
  assign(cache, ops, 1);
  for (size_t i = 0; i < shapes.size(); ++i) {
    SCOPED_TRACE("shape of rank " + std::to_string(shapes[i].size()));
    const CacheEntry* entry = cache.find(ops[i]->name());
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->id, i + 1);
    EXPECT_EQ(cache.cached_id(*ops[i]), i + 1);
    EXPECT_TRUE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, shapes[i],
                                                 ReduceOp::kAverage, 0.5, 1.0));
    std::vector<int64_t> wider = shapes[i];
    wider.push_back(1);  // one more dimension: another shape, even of as many elements
    EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, wider,
                                                  ReduceOp::kAverage, 0.5, 1.0));
    if (!shapes[i].empty()) {
      std::vector<int64_t> other = shapes[i];
      other.back() += 1;
      EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, other,
                                                    ReduceOp::kAverage, 0.5, 1.0));
    }
    EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat64, shapes[i],
                                                  ReduceOp::kAverage, 0.5, 1.0));
    EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, shapes[i],
                                                  ReduceOp::kSum, 0.5, 1.0));
    EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, shapes[i],
                                                  ReduceOp::kAverage, 1.0, 1.0));
    EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, shapes[i],
                                                  ReduceOp::kAverage, 0.5, 2.0));
  }
}

TEST(RequestCache, ANewShapeGetsItsNewIdAndTheFastMetadataFollows) {
  RequestCache cache;
  auto first = allreduce("grad", {4, 4});
  assign(cache, {first}, 3);
  const CacheEntry* before = cache.find("grad");
  std::vector<std::shared_ptr<PendingOp>> others;  // the table grows (rehashes) meanwhile
  for (int i = 0; i < 1000; ++i) others.push_back(allreduce("other." + std::to_string(i), {2}));
  assign(cache, others, 100);
  EXPECT_EQ(cache.find("grad"), before) << "an entry moved when the table grew";
  auto reshaped = allreduce("grad", {16});
  EXPECT_FALSE(cache.cached_id(*reshaped).has_value());  // its full request goes to the coordinator
  assign(cache, {reshaped}, 9);
  const CacheEntry* entry = cache.find("grad");
  ASSERT_NE(entry, nullptr);
  // Rewritten in place: an op that kept its name's entry (PendingOp::cache_entry) reads the new id.
  EXPECT_EQ(entry, before);
  EXPECT_EQ(entry->id, 9u);
  EXPECT_EQ(cache.cached_id(*reshaped), 9u);
  EXPECT_TRUE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, {16},
                                               ReduceOp::kAverage, 0.5, 1.0));
  EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, {4, 4},
                                                ReduceOp::kAverage, 0.5, 1.0));
}

// A CUDA tensor's allreduce may run by agreement too (the cached rounds, on the GPU executor),
// for the device it was cached on only: the same name in host memory, or on another GPU, is
// another request and stays with the coordinator until it is cached as such.
TEST(RequestCache, ACudaAllreduceRunsByAgreementOnTheDeviceItWasCachedFor) {
  RequestCache cache;
  auto on_gpu = allreduce("grad", {8});
  on_gpu->device = Device::cuda(0);
  EXPECT_TRUE(RequestCache::may_run_fast(*on_gpu));
  assign(cache, {on_gpu}, 1);
  const CacheEntry* entry = cache.find("grad");
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->fast);
  EXPECT_EQ(entry->device, Device::cuda(0));
  auto again = allreduce("grad", {8});
  again->device = Device::cuda(0);
  EXPECT_EQ(cache.round_entry(*again), entry);
  auto on_host = allreduce("grad", {8});
  EXPECT_EQ(cache.round_entry(*on_host), nullptr);
  auto other_gpu = allreduce("grad", {8});
  other_gpu->device = Device::cuda(1);
  EXPECT_EQ(cache.round_entry(*other_gpu), nullptr);
}

TEST(RequestCache, OpsTheFastPathCannotRunKeepNoFastMetadata) {
  RequestCache cache;
  auto grouped = allreduce("in.group", {8});
  grouped->group_id = 5;
  grouped->group_size = 1;
  auto gathered = allreduce("gathered", {8});
  gathered->op = v1::COLLECTIVE_OP_ALLGATHER;
  assign(cache, {grouped, gathered}, 1);
  for (const char* name : {"in.group", "gathered"}) {
    const CacheEntry* entry = cache.find(name);
    ASSERT_NE(entry, nullptr) << name;
    EXPECT_FALSE(entry->fast) << name;
    EXPECT_FALSE(RequestCache::fast_entry_matches(*entry, DataType::kFloat32, {8},
                                                  ReduceOp::kAverage, 0.5, 1.0))
        << name;
  }
  EXPECT_EQ(cache.cached_id(*gathered), 2u);
  EXPECT_FALSE(cache.cached_id(*grouped).has_value());  // a group's member always goes whole
}

}  // namespace
}  // namespace hvrun::detail
