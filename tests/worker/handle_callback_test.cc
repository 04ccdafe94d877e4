// Handle::on_complete: a callback added before completion runs once, from complete(), with the
// final status; one added after completion runs at once; outputs are readable from it.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "hvrun/handle.h"
#include "worker_lib/handle_state.h"

namespace hvrun {
namespace {

TEST(HandleCallback, RunsOnceWhenTheOperationCompletesLater) {
  auto state = std::make_shared<detail::HandleState>("allreduce.w");
  Handle handle(state);
  int calls = 0;
  StatusCode seen = StatusCode::kOk;
  handle.on_complete([&](const Status& s) {
    ++calls;
    seen = s.code();
  });
  EXPECT_EQ(calls, 0);
  std::thread background([&] { state->complete(aborted("job aborted: rank 1 died")); });
  background.join();
  state->complete(Status::ok());  // a second completion changes nothing and calls nothing
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, StatusCode::kAborted);
}

TEST(HandleCallback, RunsAtOnceOnACompletedHandleAndSeesItsOutput) {
  auto state = std::make_shared<detail::HandleState>("allgather.x");
  state->output.dtype = DataType::kInt32;
  state->output.shape = {3};
  state->output.bytes.resize(12);
  state->complete(Status::ok());
  Handle handle(state);
  std::vector<int64_t> shape;
  handle.on_complete([&](const Status& s) {
    EXPECT_TRUE(s.is_ok());
    shape = handle.output().shape;
  });
  EXPECT_EQ(shape, std::vector<int64_t>{3});
}

TEST(HandleCallback, CallbacksRunInTheOrderTheyWereAdded) {
  auto state = std::make_shared<detail::HandleState>("broadcast.b");
  Handle handle(state);
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) handle.on_complete([&order, i](const Status&) { order.push_back(i); });
  state->complete(Status::ok());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(HandleCallback, AnEmptyHandleReportsAFailedPrecondition) {
  StatusCode seen = StatusCode::kOk;
  Handle().on_complete([&](const Status& s) { seen = s.code(); });
  EXPECT_EQ(seen, StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace hvrun
