// hvrun_submit_path_worker: one rank of the submission-path tests (submit_path_test.cc). The
// submitting thread writes its RequestBatch itself (runtime.cc flush_outbox, saving a hop to
// the background thread), reading the request cache the background thread fills; these modes
// hit that from many threads at once.
//
//   cached-threads   4 threads x 3 rounds x 25 allreduces under the same names (rounds 2-3 go
//                    by cache id), each checked; then 4 threads submit async and wait afterwards
//   lone-latency     300 lone 4-byte allreduces in a row (the latency row's path), each checked
//   changing-shape   one name, a new shape every call: each goes in full again, then cached
//   async-then-join  allreduce_async (Average) then join(): the waiting thread's batch (the
//                    join) must never reach the coordinator before the allreduce it follows
//   shutdown-race    (own main) init, a thread submits and waits while the main thread shuts
//                    down, 15 times: the waiter's request must never be written after Goodbye
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/support/worker_checks.h"

namespace {

using hvrun::DataType;

using hvrun::test::fail;
using hvrun::test::failures;

// Rank r contributes r + seed + i at element i: the sum over ranks is known.
int32_t expected_sum(int size, int seed, int64_t i) {
  return static_cast<int32_t>(size * (seed + i) + size * (size - 1) / 2);
}

void check_allreduce(hvrun::Worker& w, const std::string& name, int64_t n, int seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(w.rank() + seed + i);
  hvrun::Status s = w.allreduce(name, hvrun::TensorView{v.data(), DataType::kInt32, {n}});
  if (!s.is_ok()) return fail(name + ": " + s.to_string());
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] != expected_sum(w.size(), seed, i))
      return fail(name + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) + ", want " +
                  std::to_string(expected_sum(w.size(), seed, i)));
  }
}

void cached_threads(hvrun::Worker& w) {
  constexpr int kThreads = 4, kRounds = 3, kOps = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&w, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (int k = 0; k < kOps; ++k)
          check_allreduce(w, "cached." + std::to_string(t) + "." + std::to_string(k), 1 + k, round);
      }
    });
  }
  for (auto& th : threads) th.join();
  threads.clear();
  // Async: every thread submits its batch first, then waits for all of it.
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&w, t] {
      std::vector<std::vector<int32_t>> data(kOps);
      std::vector<hvrun::Handle> handles;
      for (int k = 0; k < kOps; ++k) {
        data[k].assign(7, w.rank() + k);
        const std::string name = "cached." + std::to_string(t) + "." + std::to_string(k);
        handles.push_back(
            w.allreduce_async(name, hvrun::TensorView{data[k].data(), DataType::kInt32, {7}}));
      }
      for (int k = 0; k < kOps; ++k) {
        hvrun::Status s = w.wait(handles[k]);
        const int want = w.size() * k + w.size() * (w.size() - 1) / 2;
        if (!s.is_ok() || data[k][6] != want)
          fail("async " + std::to_string(k) + ": " + s.to_string());
      }
    });
  }
  for (auto& th : threads) th.join();
}

void lone_latency(hvrun::Worker& w) {
  for (int i = 0; i < 300; ++i) check_allreduce(w, "lone", 1, i);
}

void changing_shape(hvrun::Worker& w) {
  for (int i = 0; i < 12; ++i) check_allreduce(w, "reshaped", 1 + (i / 2) % 4, i);
}

void async_then_join(hvrun::Worker& w) {
  for (int i = 0; i < 150; ++i) {
    std::vector<float> v(3, static_cast<float>(w.rank() + i));
    hvrun::AllreduceOptions average;
    average.op = hvrun::ReduceOp::kAverage;
    hvrun::Handle h = w.allreduce_async(
        "before.join", hvrun::TensorView{v.data(), DataType::kFloat32, {3}}, average);
    hvrun::Handle j = w.join_async();
    hvrun::Status joined = w.wait(j);
    hvrun::Status reduced = w.wait(h);
    const float want = static_cast<float>(i) + static_cast<float>(w.size() - 1) / 2.0f;
    if (!joined.is_ok() || !reduced.is_ok() || v[2] != want)
      return fail("round " + std::to_string(i) + ": join " + joined.to_string() + ", allreduce " +
                  reduced.to_string() + ", got " + std::to_string(v[2]) + " want " +
                  std::to_string(want));
  }
}

}  // namespace

// Each round a thread submits an allreduce and waits on it (writing its own batch) while the
// main thread shuts the worker down: the wait ends OK or failed, never hangs or crashes, and
// every rank can init again (the coordinator saw a clean Goodbye, nothing after it).
int shutdown_race() {
  for (int round = 0; round < 15; ++round) {
    auto init = hvrun::Worker::init();
    if (!init.is_ok()) {
      fail("round " + std::to_string(round) + " init: " + init.status().to_string());
      break;
    }
    hvrun::Worker& w = **init;
    std::vector<int32_t> v(4, w.rank());
    std::thread waiter([&w, &v, round] {
      hvrun::Handle h =
          w.allreduce_async("race." + std::to_string(round), hvrun::TensorView{v.data(), DataType::kInt32, {4}});
      (void)w.wait(h);  // OK, cancelled or failed: all fine, as long as it returns
    });
    hvrun::Status down = w.shutdown();
    waiter.join();
    if (!down.is_ok()) fail("round " + std::to_string(round) + " shutdown: " + down.to_string());
  }
  if (failures() == 0) std::printf("shutdown-race ok\n");
  return failures() == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "shutdown-race") return shutdown_race();
  auto worker = hvrun::test::init_or_report();
  if (!worker) return 2;
  hvrun::Worker& w = *worker;
  if (mode == "cached-threads") cached_threads(w);
  else if (mode == "lone-latency") lone_latency(w);
  else if (mode == "changing-shape") changing_shape(w);
  else if (mode == "async-then-join") async_then_join(w);
  else fail("unknown mode '" + mode + "'");
  hvrun::Status down = w.shutdown();
  if (!down.is_ok()) fail("shutdown: " + down.to_string());
  if (failures() == 0) std::printf("rank %d: %s ok\n", w.rank(), mode.c_str());
  return failures() == 0 ? 0 : 1;
}
