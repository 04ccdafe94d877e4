// CachedTensorNames: the names and shapes a plan leaves out for as_cached tensors come back from
// the plan that assigned their ids, per process set; an id nobody assigned is a protocol error.
#include <gtest/gtest.h>

#include "worker_lib/runtime/cached_tensor_names.h"

namespace hvrun::detail {
namespace {

v1::ResponseTensor* add(v1::Response& response, const std::string& name, uint32_t id,
                        std::vector<int64_t> shape, bool as_cached) {
  v1::ResponseTensor* t = response.add_tensors();
  t->set_name(name);
  t->set_cache_id(id);
  t->mutable_shape()->Assign(shape.begin(), shape.end());
  t->set_as_cached(as_cached);
  return t;
}

// The wire form of `plan`: as the coordinator sends it.
v1::Plan on_the_wire(v1::Plan plan) {
  for (v1::Response& r : *plan.mutable_responses())
    for (v1::ResponseTensor& t : *r.mutable_tensors())
      if (t.as_cached()) {
        t.clear_name();
        t.clear_shape();
      }
  return plan;
}

TEST(CachedTensorNames, RestoresWhatThePlanThatAssignedTheIdSaid) {
  CachedTensorNames names;
  v1::Plan first;
  first.set_seq(1);
  v1::Response& r = *first.add_responses();
  add(r, "grad.a", 1, {4, 5}, false);
  add(r, "grad.b", 2, {3}, false);
  add(r, "uncached", 0, {2}, false);
  v1::Plan received = on_the_wire(first);
  ASSERT_TRUE(names.restore(received).is_ok());
  EXPECT_EQ(received.SerializeAsString(), first.SerializeAsString());

  v1::Plan second;
  second.set_seq(2);
  v1::Response& s = *second.add_responses();
  add(s, "grad.b", 2, {3}, true);
  add(s, "grad.a", 1, {4, 5}, true);
  received = on_the_wire(second);
  EXPECT_TRUE(received.responses(0).tensors(0).name().empty());
  ASSERT_TRUE(names.restore(received).is_ok());
  EXPECT_EQ(received.SerializeAsString(), second.SerializeAsString());
}

TEST(CachedTensorNames, AnIdRestatedInFullReplacesWhatWasKnown) {
  CachedTensorNames names;
  v1::Plan plan;
  add(*plan.add_responses(), "grad.a", 1, {4}, false);
  ASSERT_TRUE(names.restore(plan).is_ok());
  v1::Plan again;
  add(*again.add_responses(), "grad.a", 1, {8}, false);
  ASSERT_TRUE(names.restore(again).is_ok());
  v1::Plan later;
  add(*later.add_responses(), "grad.a", 1, {8}, true);
  v1::Plan received = on_the_wire(later);
  ASSERT_TRUE(names.restore(received).is_ok());
  ASSERT_EQ(received.responses(0).tensors(0).shape_size(), 1);
  EXPECT_EQ(received.responses(0).tensors(0).shape(0), 8);
}

TEST(CachedTensorNames, EachProcessSetHasItsOwnIds) {
  CachedTensorNames names;
  v1::Plan plan;
  add(*plan.add_responses(), "global.x", 1, {2}, false);
  v1::Response& in_set = *plan.add_responses();
  in_set.set_process_set_id(3);
  add(in_set, "set.y", 1, {7}, false);
  ASSERT_TRUE(names.restore(plan).is_ok());

  v1::Plan later;
  v1::Response& a = *later.add_responses();
  a.set_process_set_id(3);
  add(a, "set.y", 1, {7}, true);
  add(*later.add_responses(), "global.x", 1, {2}, true);
  v1::Plan received = on_the_wire(later);
  ASSERT_TRUE(names.restore(received).is_ok());
  EXPECT_EQ(received.responses(0).tensors(0).name(), "set.y");
  EXPECT_EQ(received.responses(1).tensors(0).name(), "global.x");
}

TEST(CachedTensorNames, AnIdNoPlanAssignedIsAProtocolError) {
  CachedTensorNames names;
  v1::Plan plan;
  plan.set_seq(9);
  add(*plan.add_responses(), "ghost", 4, {1}, true);
  v1::Plan received = on_the_wire(plan);
  Status s = names.restore(received);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cache id 4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("plan 9"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hvrun::detail
