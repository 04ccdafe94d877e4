// LazyMesh (worker_lib/backends/gloo/lazy_mesh.h): the mesh of every rank connects at its first
// use and only then; an abort before that fails every later use without connecting, and an abort
// after it reaches the connected mesh. One rank (a Gloo backend of size 1 needs no peers).
#include <gtest/gtest.h>

#include <chrono>

#include "tests/support/in_process_ranks.h"
#include "worker_lib/backends/gloo/gloo_backend.h"
#include "worker_lib/backends/gloo/lazy_mesh.h"

namespace hvrun::detail {
namespace {

struct Counted {
  MemoryStore store;
  int connects = 0;
  LazyMesh::Connect connect() {
    return [this]() -> Result<std::unique_ptr<Backend>> {
      ++connects;
      return make_gloo_backend({.rank = 0, .size = 1, .timeout = std::chrono::seconds(5)}, store);
    };
  }
};

TEST(LazyMesh, ConnectsAtItsFirstUseOnly) {
  Counted counted;
  LazyMesh mesh(counted.connect(), "test: connecting");
  EXPECT_EQ(counted.connects, 0);
  auto first = mesh.get();
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  auto second = mesh.get();
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(counted.connects, 1);
}

TEST(LazyMesh, AnAbortBeforeTheFirstUseFailsItWithoutConnecting) {
  Counted counted;
  LazyMesh mesh(counted.connect(), "test: connecting");
  mesh.abort("rank 3 died");
  auto got = mesh.get();
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(got.status().code(), StatusCode::kAborted);
  EXPECT_NE(got.status().message().find("rank 3 died"), std::string::npos);
  EXPECT_EQ(counted.connects, 0);
}

TEST(LazyMesh, AnAbortAfterConnectingReachesTheMesh) {
  Counted counted;
  LazyMesh mesh(counted.connect(), "test: connecting");
  auto got = mesh.get();
  ASSERT_TRUE(got.is_ok());
  mesh.abort("rank 3 died");
  int32_t v = 1;
  Status s = (*got)->allreduce(&v, 1, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
  EXPECT_NE(s.message().find("rank 3 died"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace hvrun::detail
