// The runtime's lifecycle (worker_lib/runtime/lifecycle.h) in one process: a stop before the
// threads started, several stops at once, an abort while a shutdown runs, and the elastic
// reset (shutdown, then a new init in the same process). The running cases use a job of size
// 1 with its own coordinator (hvrun-coordinator, found beside this test in the build's bin/).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "worker_lib/runtime/lifecycle.h"
#include "worker_lib/runtime/live_workers.h"
#include "worker_lib/runtime/runtime_parts.h"

namespace hvrun::detail {
namespace {

using Phase = RuntimeLifecycle::Phase;

Config solo_config() {
  Config config;
  config.private_coordinator = true;
  config.start_timeout = std::chrono::seconds(30);
  config.op_timeout = std::chrono::seconds(30);
  config.log_level = "warn";
  return config;
}

Status allreduce_once(Worker& worker, const std::string& name) {
  std::vector<float> data(16, 2.0f);
  Status status = worker.allreduce(name, TensorView{data.data(), DataType::kFloat32, {16}});
  if (status.is_ok() && data[0] != 2.0f) return internal_error("wrong sum");
  return status;
}

// A build that failed before any part started (no coordinator reached): the destructor's
// shutdown must stop nothing and release the claim, or the next init() is refused.
TEST(RuntimeLifecycle, ShutdownBeforeStartReleasesTheClaimAndStopsNothing) {
  const std::string address = "unix:/nonexistent/lifecycle-test";
  RuntimeParts parts(solo_config());
  auto claim = LiveWorkerClaim::claim(address);
  ASSERT_TRUE(claim.is_ok()) << claim.status().to_string();
  parts.claim = std::move(claim).value();
  RuntimeLifecycle lifecycle(parts);
  ASSERT_EQ(lifecycle.phase(), Phase::kBuilding);
  EXPECT_FALSE(LiveWorkerClaim::claim(address).is_ok()) << "the claim is held while building";

  EXPECT_TRUE(lifecycle.shutdown(std::nullopt).is_ok());
  EXPECT_EQ(lifecycle.phase(), Phase::kStopped);
  EXPECT_TRUE(LiveWorkerClaim::claim(address).is_ok()) << "shutdown did not release the claim";
  EXPECT_TRUE(lifecycle.shutdown(std::nullopt).is_ok()) << "a second shutdown is a no-op";
}

// An abort of parts never started has no data plane to tear down and no thread to wake.
TEST(RuntimeLifecycle, AbortBeforeStartTouchesNoMissingPart) {
  RuntimeParts parts(solo_config());
  RuntimeLifecycle lifecycle(parts);
  lifecycle.abort("before start");
  {
    std::lock_guard<std::mutex> lock(parts.state.mutex);
    EXPECT_EQ(parts.state.abort_reason, "before start");
  }
  EXPECT_TRUE(lifecycle.shutdown(std::nullopt).is_ok());
  EXPECT_EQ(lifecycle.phase(), Phase::kStopped);
}

// Several threads stop the same running runtime while others abort it, as a trainer's
// exception handler and its elastic reset may: every call returns, none hangs, and the
// process can init() again at once (the reset).
TEST(RuntimeLifecycle, AbortDuringShutdownThenResetInitsAgain) {
  auto first = Worker::init(solo_config());
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  std::unique_ptr<Worker> worker = std::move(first).value();
  ASSERT_TRUE(allreduce_once(*worker, "before-reset").is_ok());

  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  std::vector<Status> stops(3);
  for (size_t i = 0; i < stops.size(); ++i)
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      stops[i] = worker->shutdown();
    });
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      worker->abort("aborted while the runtime stops");
    });
  const auto start = std::chrono::steady_clock::now();
  go.store(true);
  for (std::thread& t : threads) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  for (const Status& s : stops) EXPECT_TRUE(s.is_ok()) << s.to_string();

  // Stopped: a submission fails at once, with words that say so.
  Status after = allreduce_once(*worker, "after-shutdown");
  EXPECT_FALSE(after.is_ok());
  EXPECT_NE(after.message().find("shut down"), std::string::npos) << after.to_string();
  worker->abort("after shutdown");  // nothing left to abort

  auto again = Worker::init(solo_config());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_TRUE(allreduce_once(*again.value(), "after-reset").is_ok());
  EXPECT_TRUE(again.value()->shutdown().is_ok());
}

// An abort while running fails what is in flight and what comes after with the abort's reason;
// the shutdown that follows still ends cleanly and releases the process for another init().
TEST(RuntimeLifecycle, AbortWhileRunningThenShutdown) {
  auto started = Worker::init(solo_config());
  ASSERT_TRUE(started.is_ok()) << started.status().to_string();
  std::unique_ptr<Worker> worker = std::move(started).value();
  ASSERT_TRUE(allreduce_once(*worker, "before-abort").is_ok());
  worker->abort("the test aborts");
  Status status;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // The coordinator's JobAbort arrives on the reader thread: until then a submission may
  // still be accepted; it fails once the abort lands.
  do {
    status = allreduce_once(*worker, "after-abort");
  } while (status.is_ok() && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(status.code(), StatusCode::kAborted) << status.to_string();
  EXPECT_NE(status.message().find("the test aborts"), std::string::npos) << status.to_string();
  EXPECT_TRUE(worker->shutdown().is_ok());
  worker.reset();
  auto again = Worker::init(solo_config());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_TRUE(again.value()->shutdown().is_ok());
}

}  // namespace
}  // namespace hvrun::detail
