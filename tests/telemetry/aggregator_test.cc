// The coordinator's telemetry aggregator: worker reports and negotiation events in, a
// JobTelemetry snapshot (and a timeline) out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>

#include <grpcpp/support/proto_buffer_reader.h>

#include "coordinator/telemetry/aggregator.h"
#include "coordinator/telemetry/timeline_reader.h"

namespace hvrun::coordinator::telemetry {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("hvrun-agg-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

// A stream that keeps what the aggregator sends it.
class RecordingSink final : public StreamSink {
 public:
  void send(std::shared_ptr<const grpc::ByteBuffer> message) override {
    v1::CoordinatorMessage parsed;
    grpc::ByteBuffer copy(*message);
    grpc::ProtoBufferReader reader(&copy);
    EXPECT_TRUE(parsed.ParseFromZeroCopyStream(&reader));
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(parsed);
  }
  void finish(const Status&) override {}
  std::vector<bool> recording_states() {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<bool> states;
    for (const auto& m : messages)
      if (m.has_timeline()) states.push_back(m.timeline().recording());
    return states;
  }
  std::mutex mutex;
  std::vector<v1::CoordinatorMessage> messages;
};

v1::RequestBatch full_request(const std::string& name, v1::CollectiveOp op = v1::COLLECTIVE_OP_ALLREDUCE) {
  v1::RequestBatch batch;
  v1::TensorRequest* r = batch.add_requests();
  r->set_name(name);
  r->set_op(op);
  r->set_dtype(v1::DATA_TYPE_FLOAT32);
  r->add_shape(10);
  return batch;
}

v1::Plan plan_of(uint64_t seq, const std::vector<std::pair<std::string, uint32_t>>& tensors,
                 v1::CollectiveOp op = v1::COLLECTIVE_OP_ALLREDUCE) {
  v1::Plan plan;
  plan.set_seq(seq);
  v1::Response* r = plan.add_responses();
  r->set_op(op);
  r->set_dtype(v1::DATA_TYPE_FLOAT32);
  for (const auto& [name, cache_id] : tensors) {
    v1::ResponseTensor* t = r->add_tensors();
    t->set_name(name);
    t->set_cache_id(cache_id);
    t->add_shape(10);
  }
  return plan;
}

Aggregator::Options options(int ranks, std::string timeline = "") {
  return {.job_id = "job-1", .world_size = ranks, .fusion_threshold_bytes = 1 << 20,
          .timeline_filename = std::move(timeline)};
}

TEST(Aggregator, ReportsBecomeTheRanksCountersStepsAndGpus) {
  Aggregator agg(options(2));
  agg.on_attached(0, nullptr, "host-a", 0);
  agg.on_attached(1, nullptr, "host-b", 0);
  v1::TelemetryReport report;
  v1::CollectiveStats* c = report.add_collectives();
  c->set_op(v1::COLLECTIVE_OP_ALLREDUCE);
  c->set_backend("shm");
  c->set_tensors(8);
  c->set_responses(2);
  c->set_bytes(4096);
  c->set_collective_ns(2'000'000'000);
  c->set_pack_ns(500'000'000);
  c->set_queue_ns(1'000'000);
  report.set_steps(7);
  v1::GpuSample* g = report.add_gpus();
  g->set_index(0);
  g->set_utilization_percent(55);
  g->set_memory_total_bytes(80);
  agg.on_report(0, report);

  JobTelemetry job = agg.snapshot();
  EXPECT_EQ(job.job_id, "job-1");
  EXPECT_EQ(job.world_size, 2);
  EXPECT_EQ(job.ranks_alive, 2);
  EXPECT_EQ(job.fusion_threshold_bytes, 1 << 20);
  ASSERT_EQ(job.ranks.size(), 2u);
  const RankTelemetry& r0 = job.ranks[0];
  EXPECT_EQ(r0.host, "host-a");
  ASSERT_EQ(r0.collectives.size(), 1u);
  EXPECT_EQ(r0.collectives[0].op, "allreduce");
  EXPECT_EQ(r0.collectives[0].backend, "shm");
  EXPECT_EQ(r0.collectives[0].tensors, 8u);
  EXPECT_EQ(r0.collectives[0].responses, 2u);
  EXPECT_EQ(r0.collectives[0].bytes, 4096u);
  EXPECT_DOUBLE_EQ(r0.collectives[0].collective_seconds, 2.0);
  EXPECT_DOUBLE_EQ(r0.collectives[0].pack_seconds, 0.5);
  EXPECT_DOUBLE_EQ(r0.collectives[0].queue_seconds, 0.001);
  EXPECT_EQ(r0.steps, 7u);
  ASSERT_EQ(r0.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(r0.gpus[0].utilization_percent, 55);
  EXPECT_GE(r0.seconds_since_report, 0);
  EXPECT_EQ(job.ranks[1].seconds_since_report, -1);  // never reported
  EXPECT_EQ(job.steps, 7u);                           // only rank 0 reported so far

  agg.on_goodbye(0);
  agg.on_lost(1);
  job = agg.snapshot();
  EXPECT_EQ(job.ranks_alive, 0);
  EXPECT_EQ(job.ranks[0].steps, 7u);  // still readable after the job ended
}

TEST(Aggregator, NegotiationAndWaitTimesPerRankWithCacheHitsAndLongestWait) {
  Aggregator agg(options(2));
  const Clock::time_point t0 = Clock::now();
  agg.on_requests(0, full_request("grad"), t0);
  agg.on_requests(1, full_request("grad"), t0 + milliseconds(30));
  agg.on_plan(plan_of(1, {{"grad", 1}}), t0 + milliseconds(40));

  // Steady state: by cache id (both forms), rank 1 first this time.
  const Clock::time_point t1 = t0 + milliseconds(100);
  v1::RequestBatch packed;
  packed.add_cached_ids(1);
  v1::RequestBatch by_id;
  by_id.add_requests()->set_cache_id(1);
  agg.on_requests(1, packed, t1);
  agg.on_requests(0, by_id, t1 + milliseconds(5));
  agg.on_plan(plan_of(2, {{"grad", 1}}), t1 + milliseconds(6));

  JobTelemetry job = agg.snapshot();
  const RankTelemetry& r0 = job.ranks[0];
  const RankTelemetry& r1 = job.ranks[1];
  EXPECT_EQ(r0.tensors_negotiated, 2u);
  EXPECT_EQ(r1.tensors_negotiated, 2u);
  EXPECT_EQ(r0.cache_hits, 1u);
  EXPECT_EQ(r1.cache_hits, 1u);
  EXPECT_NEAR(r0.negotiation_seconds, 0.040 + 0.001, 1e-9);
  EXPECT_NEAR(r0.wait_seconds, 0.030, 1e-9);
  EXPECT_NEAR(r1.negotiation_seconds, 0.010 + 0.006, 1e-9);
  EXPECT_NEAR(r1.wait_seconds, 0.005, 1e-9);
  EXPECT_EQ(r0.longest_wait_tensor, "grad");
  EXPECT_NEAR(r0.longest_wait_seconds, 0.030, 1e-9);
  EXPECT_EQ(job.plans, 2u);
  EXPECT_EQ(job.fused_responses, 0u);
}

// The negotiation may report a plan after a worker already answered it (plans are sent, then
// reported): the next round's requests, by name or by a cache id the plan assigned, must count.
TEST(Aggregator, NextRoundRequestsSeenBeforeThePlanAreKept) {
  Aggregator agg(options(2));
  const Clock::time_point t0 = Clock::now();
  agg.on_requests(0, full_request("g"), t0);
  agg.on_requests(1, full_request("g"), t0);
  agg.on_requests(0, full_request("h"), t0);
  agg.on_requests(1, full_request("h"), t0);
  // Plan 1 (assigning cache id 7 to "g") went out; rank 0 answers before it is reported, by id
  // for "g" and by name for "h".
  v1::RequestBatch by_id;
  by_id.add_cached_ids(7);
  agg.on_requests(0, by_id, t0 + milliseconds(2));
  agg.on_requests(0, full_request("h"), t0 + milliseconds(2));
  v1::Plan first = plan_of(1, {{"g", 7}});
  *first.add_responses() = plan_of(1, {{"h", 0}}).responses(0);
  agg.on_plan(first, t0 + milliseconds(1));
  agg.on_requests(1, by_id, t0 + milliseconds(5));
  agg.on_requests(1, full_request("h"), t0 + milliseconds(5));
  v1::Plan second = plan_of(2, {{"g", 7}});
  *second.add_responses() = plan_of(2, {{"h", 0}}).responses(0);
  agg.on_plan(second, t0 + milliseconds(6));
  JobTelemetry job = agg.snapshot();
  EXPECT_EQ(job.ranks[0].tensors_negotiated, 4u);
  EXPECT_EQ(job.ranks[1].tensors_negotiated, 4u);
  // Second round: rank 0 waited 3 ms for rank 1, for both tensors at once: 3 ms of wall time.
  EXPECT_NEAR(job.ranks[0].wait_seconds, 0.003, 1e-9);
  EXPECT_NEAR(job.ranks[0].negotiation_seconds, 0.001 * 2 + 0.004 * 2, 1e-9);
}

// Waits for tensors of one step overlap: a rank's total is the wall time it waited, never the
// sum (which made "the others waited 35.9 s each" of a 5.4 s job).
TEST(Aggregator, OverlappingWaitsCountOnceAndNeverExceedTheWallTime) {
  Aggregator agg(options(2));
  const Clock::time_point t0 = Clock::now();
  constexpr int kTensors = 50;
  for (int i = 0; i < kTensors; ++i)
    agg.on_requests(0, full_request("t" + std::to_string(i)), t0 + milliseconds(i));
  for (int i = 0; i < kTensors; ++i)
    agg.on_requests(1, full_request("t" + std::to_string(i)), t0 + milliseconds(100));
  std::vector<std::pair<std::string, uint32_t>> fused;
  for (int i = 0; i < kTensors; ++i) fused.emplace_back("t" + std::to_string(i), 0);
  agg.on_plan(plan_of(1, fused), t0 + milliseconds(101));
  // A later step, apart from the first: adds its own wait.
  const Clock::time_point t1 = t0 + milliseconds(500);
  agg.on_requests(0, full_request("late"), t1);
  agg.on_requests(1, full_request("late"), t1 + milliseconds(20));
  agg.on_plan(plan_of(2, {{"late", 0}}), t1 + milliseconds(21));
  const JobTelemetry job = agg.snapshot();
  EXPECT_NEAR(job.ranks[0].wait_seconds, 0.100 + 0.020, 1e-9);
  EXPECT_NEAR(job.ranks[0].longest_wait_seconds, 0.100, 1e-9);
  EXPECT_NEAR(job.ranks[1].wait_seconds, 0.0, 1e-9);
}

TEST(Aggregator, FusionJoinsAndStallsAreCounted) {
  Aggregator agg(options(3));
  const Clock::time_point t0 = Clock::now();
  for (int r = 0; r < 3; ++r) {
    agg.on_requests(r, full_request("a"), t0);
    agg.on_requests(r, full_request("b"), t0);
  }
  agg.on_plan(plan_of(1, {{"a", 1}, {"b", 2}}), t0 + milliseconds(1));
  JobTelemetry job = agg.snapshot();
  EXPECT_EQ(job.fused_responses, 1u);
  EXPECT_EQ(job.fused_bytes, 2u * 10 * 4);

  agg.on_requests(2, full_request("join", v1::COLLECTIVE_OP_JOIN), t0);
  EXPECT_EQ(agg.snapshot().ranks_joined, 1);
  EXPECT_TRUE(agg.snapshot().ranks[2].joined);
  agg.on_plan(plan_of(2, {{"join", 0}}, v1::COLLECTIVE_OP_JOIN), t0 + milliseconds(2));
  EXPECT_EQ(agg.snapshot().ranks_joined, 0);

  StalledTensor stall;
  stall.name = "late";
  stall.missing_ranks = {1, 2};
  stall.submitted_ranks = {0};
  agg.on_stalls({stall});
  agg.on_stalls({stall});
  job = agg.snapshot();
  EXPECT_EQ(job.ranks[0].stalls, 0u);
  EXPECT_EQ(job.ranks[1].stalls, 2u);
  EXPECT_EQ(job.ranks[2].stalls, 2u);
}

TEST(Aggregator, TimelineFromTheStartHoldsWorkerAndNegotiationEvents) {
  const std::string path = temp_path("start.json");
  {
    Aggregator agg(options(2, path));
    ASSERT_TRUE(agg.startup_status().is_ok());
    auto sink = std::make_shared<RecordingSink>();
    agg.on_attached(0, sink, "a", 0);
    EXPECT_EQ(sink->recording_states(), std::vector<bool>{true});  // told at attach
    EXPECT_TRUE(agg.snapshot().timeline_recording);
    const Clock::time_point t0 = Clock::now();
    agg.on_requests(0, full_request("x"), t0);
    agg.on_requests(1, full_request("x"), t0 + milliseconds(3));
    agg.on_plan(plan_of(1, {{"x", 0}}), t0 + milliseconds(4));
    v1::TelemetryReport report;
    for (const char* phase : {"queued", "pack", "collective", "unpack"}) {
      v1::TimelineEvent* e = report.add_events();
      e->set_lane("x");
      e->set_name(phase);
      e->set_start_unix_us(1);
      e->set_duration_us(2);
      (*e->mutable_args())["backend"] = "gloo";
    }
    agg.on_report(1, report);
    agg.on_abort("rank 1 went away", 1);
    agg.finish();
  }
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->whole_file_json);
  EXPECT_EQ(s->phases[0]["negotiated"], 1u);
  EXPECT_EQ(s->phases[1]["negotiated"], 1u);
  EXPECT_EQ(s->phases[1]["collective"], 1u);
  EXPECT_EQ(s->phases[2]["plan"], 1u);   // the coordinator's lane: pid = world size
  EXPECT_EQ(s->phases[2]["abort"], 1u);
  std::filesystem::remove(path);
}

TEST(Aggregator, RunTimeStopWaitsForEveryRanksLastEvents) {
  const std::string path = temp_path("runtime.json");
  Aggregator agg(options(2));
  auto sink0 = std::make_shared<RecordingSink>();
  auto sink1 = std::make_shared<RecordingSink>();
  agg.on_attached(0, sink0, "a", 0);
  agg.on_attached(1, sink1, "a", 1);
  EXPECT_FALSE(agg.snapshot().timeline_recording);
  agg.on_timeline_control(1, path);
  EXPECT_TRUE(agg.snapshot().timeline_recording);
  EXPECT_EQ(sink0->recording_states(), std::vector<bool>{true});

  agg.on_timeline_control(0, "");
  EXPECT_FALSE(agg.snapshot().timeline_recording);
  EXPECT_EQ(sink1->recording_states(), (std::vector<bool>{true, false}));
  v1::TelemetryReport last;
  v1::TimelineEvent* e = last.add_events();
  e->set_lane("y");
  e->set_name("collective");
  e->set_start_unix_us(5);
  e->set_duration_us(1);
  last.set_timeline_recording(false);
  agg.on_report(0, last);
  auto open = read_timeline(path);
  ASSERT_TRUE(open.is_ok());
  EXPECT_FALSE(open->closed);  // rank 1's last events are still to come
  agg.on_report(1, last);
  auto s = read_timeline(path);
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_TRUE(s->closed);
  EXPECT_TRUE(s->whole_file_json);
  EXPECT_EQ(s->phases[0]["collective"], 1u);
  EXPECT_EQ(s->phases[1]["collective"], 1u);
  std::filesystem::remove(path);
}

TEST(Aggregator, UnwritableTimelineIsAStartupError) {
  Aggregator agg(options(1, "/nonexistent-dir-hvrun/t.json"));
  EXPECT_FALSE(agg.startup_status().is_ok());
  EXPECT_NE(agg.startup_status().message().find("/nonexistent-dir-hvrun/t.json"), std::string::npos);
}

}  // namespace
}  // namespace hvrun::coordinator::telemetry
