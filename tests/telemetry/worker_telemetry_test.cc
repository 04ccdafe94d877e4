// The worker's telemetry: phase counters per (op, backend), the timeline buffer (only while
// recording, bounded), what a report carries, and the thread that sends reports.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "worker_lib/telemetry/report_sender.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail::telemetry {
namespace {

using std::chrono::milliseconds;

v1::Response fused_allreduce() {
  v1::Response r;
  r.set_op(v1::COLLECTIVE_OP_ALLREDUCE);
  r.set_dtype(v1::DATA_TYPE_FLOAT32);
  r.add_tensors()->set_name("grad.a");
  r.add_tensors()->set_name("grad.b");
  return r;
}

void run_phases(WorkerTelemetry& t, const v1::Response& r) {
  const auto s = PhaseClock::now();
  t.on_phase(r, Phase::kPack, s, s + milliseconds(1), 100, "gloo");
  t.on_phase(r, Phase::kCollective, s + milliseconds(1), s + milliseconds(3), 100, "gloo");
  t.on_phase(r, Phase::kUnpack, s + milliseconds(3), s + milliseconds(4), 100, "gloo");
}

TEST(WorkerTelemetry, PhasesAddUpPerOpAndBackendWithoutEventsWhenNotRecording) {
  WorkerTelemetry t("gloo");
  run_phases(t, fused_allreduce());
  run_phases(t, fused_allreduce());
  t.mark_step();
  EXPECT_TRUE(t.changed());
  v1::TelemetryReport report = t.take_report();
  ASSERT_EQ(report.collectives_size(), 1);
  const v1::CollectiveStats& c = report.collectives(0);
  EXPECT_EQ(c.op(), v1::COLLECTIVE_OP_ALLREDUCE);
  EXPECT_EQ(c.backend(), "gloo");
  EXPECT_EQ(c.tensors(), 4u);
  EXPECT_EQ(c.responses(), 2u);
  EXPECT_EQ(c.bytes(), 200u);
  EXPECT_EQ(c.collective_ns(), 4'000'000u);
  EXPECT_EQ(c.pack_ns(), 2'000'000u);
  EXPECT_EQ(c.unpack_ns(), 2'000'000u);
  EXPECT_EQ(report.steps(), 1u);
  EXPECT_EQ(report.events_size(), 0);
  EXPECT_FALSE(report.timeline_recording());
  EXPECT_FALSE(t.changed());
}

// Collectives run without the coordinator are counted apart, per device: CPU tensors under
// "<cpu backend>-fast", CUDA tensors (the GPU executor's agreed rounds) under "nccl-fast".
TEST(WorkerTelemetry, FastCollectivesAreCountedPerDevice) {
  WorkerTelemetry t("shm");
  const auto s = PhaseClock::now();
  t.on_fast_collective(v1::COLLECTIVE_OP_ALLREDUCE, s, s + milliseconds(1), 64, false);
  t.on_fast_collective(v1::COLLECTIVE_OP_ALLREDUCE, s, s + milliseconds(2), 400, true);
  t.on_fast_collective(v1::COLLECTIVE_OP_ALLREDUCE, s, s + milliseconds(2), 400, true);
  EXPECT_TRUE(t.changed());
  v1::TelemetryReport report = t.take_report();
  ASSERT_EQ(report.collectives_size(), 2);
  for (const v1::CollectiveStats& c : report.collectives()) {
    const bool gpu = c.backend() == "nccl-fast";
    EXPECT_TRUE(gpu || c.backend() == "shm-fast") << c.backend();
    EXPECT_EQ(c.responses(), gpu ? 2u : 1u);
    EXPECT_EQ(c.bytes(), gpu ? 800u : 64u);
    EXPECT_EQ(c.collective_ns(), gpu ? 4'000'000u : 1'000'000u);
  }
  EXPECT_FALSE(t.changed());
}

TEST(WorkerTelemetry, RecordingBuffersEveryPhaseOnTheRightLanes) {
  WorkerTelemetry t("gloo");
  t.set_recording(true);
  const v1::Response r = fused_allreduce();
  t.on_submitted("grad.a", v1::COLLECTIVE_OP_ALLREDUCE);
  t.on_plan_received(7);
  t.on_response_started(7, r);
  run_phases(t, r);
  t.on_response_done(r, true);
  v1::TelemetryReport report = t.take_report();
  EXPECT_TRUE(report.timeline_recording());
  std::vector<std::string> names;
  for (const auto& e : report.events()) names.push_back(e.name() + "@" + e.lane());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "submitted@grad.a", "queued@fused 2: grad.a + 1 more",
                       "pack@fused 2: grad.a + 1 more", "collective@fused 2: grad.a + 1 more",
                       "unpack@fused 2: grad.a + 1 more", "done@grad.a", "done@grad.b"}));
  EXPECT_EQ(report.events(3).duration_us(), 2000);
  EXPECT_EQ(report.events(3).args().at("backend"), "gloo");
  EXPECT_EQ(report.events(3).args().at("bytes"), "100");
  EXPECT_EQ(report.events(5).duration_us(), -1);  // instant
  ASSERT_EQ(report.collectives_size(), 1);
  EXPECT_EQ(report.collectives(0).responses(), 1u);
  EXPECT_EQ(t.take_report().events_size(), 0);  // moved out
}

TEST(WorkerTelemetry, BufferIsBoundedAndSaysHowManyEventsItDropped) {
  WorkerTelemetry t("shm", 10);
  std::atomic<int> piled{0};
  t.set_pile_up_callback(5, [&] { ++piled; });
  t.set_recording(true);
  for (int i = 0; i < 25; ++i) t.instant("lane", "tick");
  EXPECT_EQ(piled.load(), 1);
  EXPECT_EQ(t.buffered_events(), 10u);
  EXPECT_EQ(t.dropped_events(), 15u);
  v1::TelemetryReport report = t.take_report();
  ASSERT_EQ(report.events_size(), 11);
  EXPECT_EQ(report.events(10).name(), "events dropped");
  EXPECT_EQ(report.events(10).args().at("count"), "15");
  for (int i = 0; i < 5; ++i) t.instant("lane", "tick");
  EXPECT_EQ(piled.load(), 2);  // signalled again after the report
}

TEST(WorkerTelemetry, MarkStepEverywhereCountsOnEveryLiveWorker) {
  WorkerTelemetry a("shm"), b("shm");
  register_for_steps(&a);
  register_for_steps(&b);
  mark_step_everywhere();
  unregister_for_steps(&b);
  mark_step_everywhere();
  unregister_for_steps(&a);
  EXPECT_EQ(a.steps(), 2u);
  EXPECT_EQ(b.steps(), 1u);
}

}  // namespace
}  // namespace hvrun::detail::telemetry

namespace hvrun::detail::telemetry {
namespace {

// What a ReportSender wrote, with a bounded wait for the next message.
struct SentMessages {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<v1::WorkerMessage> messages;
  bool accept = true;

  ReportSender::Send sender() {
    return [this](const v1::WorkerMessage& m) {
      std::lock_guard<std::mutex> lock(mutex);
      messages.push_back(m);
      cv.notify_all();
      return accept;
    };
  }
  bool wait_for_count(size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] { return messages.size() >= n; });
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages.size();
  }
};

TEST(ReportSender, SendsChangesPeriodicallyOnRequestAndALastReportAtStop) {
  WorkerTelemetry t("shm");
  SentMessages sent;
  ReportSender sender(t, sent.sender(), milliseconds(20));
  sender.start();
  t.mark_step();
  ASSERT_TRUE(sent.wait_for_count(1));
  {
    std::lock_guard<std::mutex> lock(sent.mutex);
    EXPECT_EQ(sent.messages[0].telemetry().steps(), 1u);
  }

  // Nothing changed, but the coordinator waits for this rank's report (timeline stopped).
  const size_t before = sent.count();
  sender.request_report();
  ASSERT_TRUE(sent.wait_for_count(before + 1));

  t.mark_step();
  sender.flush_and_stop();  // the last counters go out even if the thread did not run again
  std::lock_guard<std::mutex> lock(sent.mutex);
  EXPECT_EQ(sent.messages.back().telemetry().steps(), 2u);
}

TEST(ReportSender, AClosedStreamStopsTheThreadAndTheFinalReport) {
  WorkerTelemetry t("shm");
  SentMessages sent;
  sent.accept = false;
  ReportSender sender(t, sent.sender(), milliseconds(10));
  sender.start();
  t.mark_step();
  ASSERT_TRUE(sent.wait_for_count(1));
  t.mark_step();
  sender.flush_and_stop();
  EXPECT_EQ(sent.count(), 1u);  // no write after the stream said it is closed
}

TEST(ReportSender, GpuSamplesAreAttachedAndAnEmptySamplerIsDropped) {
  WorkerTelemetry t("nccl");
  SentMessages sent;
  std::atomic<int> calls{0};
  ReportSender sender(t, sent.sender(), milliseconds(10), [&] {
    ++calls;
    v1::GpuSample g;
    g.set_index(0);
    g.set_utilization_percent(42);
    return std::vector<v1::GpuSample>{g};
  });
  sender.start();
  ASSERT_TRUE(sent.wait_for_count(1));
  {
    std::lock_guard<std::mutex> lock(sent.mutex);
    ASSERT_EQ(sent.messages[0].telemetry().gpus_size(), 1);
    EXPECT_EQ(sent.messages[0].telemetry().gpus(0).utilization_percent(), 42);
  }
  sender.flush_and_stop();
  EXPECT_GE(calls.load(), 1);

  WorkerTelemetry quiet("shm");
  SentMessages none;
  std::atomic<int> empty_calls{0};
  ReportSender without(quiet, none.sender(), milliseconds(10), [&] {
    ++empty_calls;
    return std::vector<v1::GpuSample>{};
  });
  without.start();
  ASSERT_TRUE(none.wait_for_count(1));  // the first sample is due at once
  quiet.mark_step();
  ASSERT_TRUE(none.wait_for_count(2));
  without.flush_and_stop();
  EXPECT_EQ(empty_calls.load(), 1);  // no NVML: never asked again
}

}  // namespace
}  // namespace hvrun::detail::telemetry
