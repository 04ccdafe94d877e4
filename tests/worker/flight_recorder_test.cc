// The flight recorder (worker_lib/autopsy/flight_recorder.h): records in submission order with
// their state and times, the ring keeps the latest `capacity`, updates of overwritten records
// are dropped, names are cut at 63 bytes, and concurrent submitters lose no record.
#include "worker_lib/autopsy/flight_recorder.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

namespace hvrun::detail {
namespace {

TEST(FlightRecorder, RecordsSubmitStartAndEndInOrder) {
  FlightRecorder recorder(8, "shm");
  const uint64_t a = recorder.submitted("grad.a", v1::COLLECTIVE_OP_ALLREDUCE, DataType::kFloat32,
                                        1024, 0);
  const uint64_t b = recorder.submitted("grad.b", v1::COLLECTIVE_OP_BROADCAST, DataType::kInt64,
                                        64, 2);
  recorder.started(a, FlightRecorder::Runner::kCpuBackend);
  recorder.ended(a, true);
  recorder.started(b, FlightRecorder::Runner::kGpu);
  const auto records = recorder.snapshot();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].sequence(), a);
  EXPECT_EQ(records[0].name(), "grad.a");
  EXPECT_EQ(records[0].op(), v1::COLLECTIVE_OP_ALLREDUCE);
  EXPECT_EQ(records[0].dtype(), v1::DATA_TYPE_FLOAT32);
  EXPECT_EQ(records[0].bytes(), 1024u);
  EXPECT_EQ(records[0].state(), "done");
  EXPECT_EQ(records[0].backend(), "shm");
  EXPECT_GT(records[0].submit_unix_us(), 0);
  EXPECT_GE(records[0].start_unix_us(), records[0].submit_unix_us());
  EXPECT_GE(records[0].end_unix_us(), records[0].start_unix_us());
  EXPECT_GT(records[0].submitter_tid(), 0);
  EXPECT_EQ(records[1].state(), "running");
  EXPECT_EQ(records[1].backend(), "nccl");
  EXPECT_EQ(records[1].dtype(), v1::DATA_TYPE_INT64);
  EXPECT_EQ(records[1].process_set_id(), 2u);
  EXPECT_EQ(records[1].end_unix_us(), 0);
  EXPECT_EQ(recorder.recorded(), 2u);
}

TEST(FlightRecorder, KeepsTheLatestCapacityAndDropsUpdatesOfOverwrittenRecords) {
  FlightRecorder recorder(4, "gloo");
  std::vector<uint64_t> sequences;
  for (int i = 0; i < 10; ++i)
    sequences.push_back(recorder.submitted("t" + std::to_string(i), v1::COLLECTIVE_OP_ALLREDUCE,
                                           DataType::kFloat32, 4, 0));
  recorder.ended(sequences[0], false);  // overwritten long ago: must not touch t8's slot
  const auto records = recorder.snapshot();
  ASSERT_EQ(records.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(records[i].name(), "t" + std::to_string(6 + i));
    EXPECT_EQ(records[i].state(), "submitted");
  }
  EXPECT_EQ(recorder.recorded(), 10u);
}

TEST(FlightRecorder, CutsLongNamesAt63Bytes) {
  FlightRecorder recorder(2, "shm");
  const std::string name(100, 'x');
  recorder.submitted(name, v1::COLLECTIVE_OP_ALLGATHER, DataType::kUInt8, 1, 0);
  const auto records = recorder.snapshot();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].name(), std::string(63, 'x'));
}

TEST(FlightRecorder, ConcurrentSubmittersLoseNoRecord) {
  constexpr int kThreads = 4;
  constexpr int kEach = 500;
  FlightRecorder recorder(kThreads * kEach, "shm");
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&recorder, t] {
      for (int i = 0; i < kEach; ++i) {
        const uint64_t s = recorder.submitted("r" + std::to_string(t) + "." + std::to_string(i),
                                              v1::COLLECTIVE_OP_ALLREDUCE, DataType::kFloat32, 4, 0);
        recorder.started(s, FlightRecorder::Runner::kCpuBackend);
        recorder.ended(s, true);
      }
    });
  // A reader meanwhile sees only whole records.
  for (int k = 0; k < 50; ++k)
    for (const auto& record : recorder.snapshot()) ASSERT_EQ(record.name()[0], 'r');
  for (auto& t : threads) t.join();
  const auto records = recorder.snapshot();
  ASSERT_EQ(records.size(), static_cast<size_t>(kThreads * kEach));
  std::set<std::string> names;
  for (const auto& record : records) {
    names.insert(record.name());
    EXPECT_EQ(record.state(), "done");
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kThreads * kEach));
}

}  // namespace
}  // namespace hvrun::detail
