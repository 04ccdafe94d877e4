#include "common/status.h"

#include <gtest/gtest.h>

namespace hvrun {
namespace {

Result<int> half(int v) {
  if (v % 2 != 0) return invalid_argument("odd value " + std::to_string(v));
  return v / 2;
}

Result<int> quarter(int v) {
  HVRUN_ASSIGN_OR_RETURN(int h, half(v));
  return half(h);
}

Status check_positive(int v) {
  if (v <= 0) return invalid_argument("not positive");
  return Status::ok();
}

Status check_both(int a, int b) {
  HVRUN_RETURN_IF_ERROR(check_positive(a));
  HVRUN_RETURN_IF_ERROR(check_positive(b));
  return Status::ok();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.is_ok());
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = deadline_exceeded("rank 1 on node2 did not answer within 30 s");
  EXPECT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.to_string(), "DEADLINE_EXCEEDED: rank 1 on node2 did not answer within 30 s");
  EXPECT_EQ(s.with_context("rendezvous").message(),
            "rendezvous: rank 1 on node2 did not answer within 30 s");
  EXPECT_EQ(s.with_context("rendezvous").code(), StatusCode::kDeadlineExceeded);
}

TEST(StatusTest, CodesMatchGrpcNumbering) {
  // The coordinator maps these one-to-one onto grpc::StatusCode, which uses the same numbers.
  EXPECT_EQ(static_cast<int>(StatusCode::kUnauthenticated), 16);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnavailable), 14);
  EXPECT_EQ(static_cast<int>(StatusCode::kAborted), 10);
}

TEST(ResultTest, ValueOrStatusAndMacros) {
  Result<int> q = quarter(12);
  ASSERT_TRUE(q.is_ok());
  EXPECT_EQ(*q, 3);
  Result<int> bad = quarter(6);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "odd value 3");
  EXPECT_TRUE(check_both(1, 2).is_ok());
  EXPECT_EQ(check_both(1, -2).message(), "not positive");
}

}  // namespace
}  // namespace hvrun
