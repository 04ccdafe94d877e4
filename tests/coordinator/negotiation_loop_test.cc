// The negotiation loop's delivery order: a JobAbort never overtakes a plan on some streams only.
#include "coordinator/service/negotiation_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/coordinator/engine_sim.h"
#include "tests/support/poll_until.h"

namespace hvrun::coordinator::service {
namespace {

using coordinator::testing::batch_of;
using coordinator::testing::request;

// A worker's stream that records the kinds of message it is sent, as the real one writes
// them: in send() order, nothing after finish().
class RecordingSink : public StreamSink {
 public:
  // Called (without the sink's lock) for every plan this sink is sent.
  std::function<void()> on_plan;

  void send(std::shared_ptr<const grpc::ByteBuffer> message) override {
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(message->Dump(&slices).ok());
    std::string bytes;
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    v1::CoordinatorMessage parsed;
    ASSERT_TRUE(parsed.ParseFromString(bytes));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      kinds_.push_back(parsed.kind_case());
    }
    if (parsed.kind_case() == v1::CoordinatorMessage::kPlan && on_plan) on_plan();
  }
  void finish(const Status&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  std::vector<v1::CoordinatorMessage::KindCase> kinds() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return kinds_;
  }
  bool finished() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<v1::CoordinatorMessage::KindCase> kinds_;
  bool finished_ = false;
};

// Rank 0 runs a barrier the moment its plan reaches it and aborts the job (another gRPC thread
// handles its abort) while the plan is still on its way to ranks 1 and 2. Those ranks must get
// the plan before the abort, as rank 0 did: else their barrier fails although rank 0's passed.
TEST(NegotiationLoop, AnAbortDuringAPlansBroadcastComesAfterThatPlanOnEveryStream) {
  constexpr int kRanks = 3;
  NegotiationLoop loop(EngineOptions{kRanks, 64 << 20, std::chrono::microseconds(0), 16}, {}, {});
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int r = 0; r < kRanks; ++r) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(loop.attach(r, sinks.back()).is_ok());
  }
  std::thread aborter;
  sinks[0]->on_plan = [&] {
    aborter = std::thread([&] {
      v1::JobAbort abort;
      abort.set_reason("rank 0 aborted after its barrier");
      abort.set_rank(0);
      loop.abort(abort, aborted("rank 0 aborted after its barrier"));
    });
    // The plan's delivery to the other ranks is late (a busy machine): the abort has every
    // chance to go first.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  for (int r = 0; r < kRanks; ++r)
    loop.submit(r, batch_of({request("barrier.0", v1::COLLECTIVE_OP_BARRIER, {})}));
  const bool all_finished = hvrun::test::poll_until(
      [&] {
        for (const auto& s : sinks)
          if (!s->finished()) return false;
        return true;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(5));
  if (aborter.joinable()) aborter.join();
  ASSERT_TRUE(all_finished) << "the abort never reached every stream";
  const std::vector<v1::CoordinatorMessage::KindCase> expected = {
      v1::CoordinatorMessage::kWelcome, v1::CoordinatorMessage::kPlan,
      v1::CoordinatorMessage::kAbort};
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(sinks[r]->kinds(), expected)
        << "rank " << r << "'s stream (kinds: 1 welcome, 2 plan, 3 abort)";
}

}  // namespace
}  // namespace hvrun::coordinator::service
