// hvrun_cached_rounds_worker: one rank of the cached-rounds tests (cached_rounds_test.cc).
// Asynchronous allreduces of negotiated tensors run through rounds agreed among the ranks
// (worker_lib/agreement/cached_rounds.h) instead of the coordinator; everything else must go
// through the coordinator with the same results. Each step submits a gradient-like set of
// tensors asynchronously, then waits for them all; every result is checked against a reference,
// and every result's bytes go into a digest the test compares with the coordinator path's.
//
//   steady     40 steps of six tensors (float32, float64, int32; sum, average, max, scaled;
//              4 bytes to 20 KB, fused and alone), in the same order on every rank
//   order      the same, each rank submitting in its own order (rounds agree on part of a
//              step and hold the rest, or fall back)
//   late       rank 1 sleeps 30 ms before every 4th step, with a 2 ms round wait: rank 0 gives
//              up and sends those steps to the coordinator; none of its steps may take much
//              longer than the lateness
//   mismatch   at step 10 rank 1 submits one cached tensor with another shape: both ranks'
//              handles of it fail with the coordinator's mismatch error; the steps after run
//              as before
//   join       ranks > 0 join after 10 steps; rank 0 goes on alone for 10 more (joined ranks
//              contribute nothing, Average divides by the contributors)
//   spaced     30 steps whose six submissions come 300 us apart, and whose waits start 5 ms
//              after the last: the background thread runs them, gathered for the cycle time
//   polled     30 steps whose handles nobody waits for: the rank polls them until they
//              complete (at most 10 s a step), so only the background thread, woken a cycle
//              after a step's first submission, can run them
//
// Prints "digest <hex>" (the steps' results) and "rank R: MODE ok".
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/worker/tensor_values.h"

namespace {

using hvrun::DataType;
using hvrun::ReduceOp;

int g_failures = 0;

void fail(const std::string& what) {
  if (++g_failures <= 10) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

struct TensorSpec {
  const char* name;
  DataType dtype;
  int64_t count;
  ReduceOp op;
  double prescale;
  double postscale;
};

// Six tensors: three float32 sums fuse into one response (the coordinator's threshold), the
// others each start a response of their own fusion key.
const TensorSpec kSpecs[] = {
    {"w.0", DataType::kFloat32, 1000, ReduceOp::kSum, 1, 1},
    {"w.1", DataType::kFloat32, 1, ReduceOp::kSum, 1, 1},
    {"w.2", DataType::kFloat32, 5000, ReduceOp::kSum, 1, 1},
    {"b.0", DataType::kFloat64, 300, ReduceOp::kAverage, 1, 1},
    {"c.0", DataType::kInt32, 50, ReduceOp::kMax, 1, 1},
    {"s.0", DataType::kFloat32, 700, ReduceOp::kSum, 0.5, 3},
};
constexpr int kTensors = 6;

// Rank r's value: not exact in binary, so the sum's bits depend on the order of reduction.
double value(int rank, int tensor, int64_t i, int step, DataType t) {
  const double v = std::sin(1.0 + rank * 0.37 + tensor * 1.3 + static_cast<double>(i) * 0.011 +
                            step * 0.7);
  return t == DataType::kInt32 ? std::floor(v * 1000) : v;
}

double reference(const TensorSpec& s, int tensor, int64_t i, int step,
                 const std::vector<int>& contributors) {
  double acc = s.op == ReduceOp::kMax ? -1e300 : 0;
  for (int r : contributors) {
    const double v = value(r, tensor, i, step, s.dtype) * s.prescale;
    acc = s.op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
  }
  if (s.op == ReduceOp::kAverage) acc /= static_cast<double>(contributors.size());
  return acc * s.postscale;
}

double tolerance(DataType t, double want) {
  if (t == DataType::kFloat32) return std::abs(want) * 1e-5 + 1e-5;
  if (t == DataType::kFloat64) return std::abs(want) * 1e-12 + 1e-12;
  return 0;
}

uint64_t g_digest = 1469598103934665603ull;
void digest(const std::vector<std::byte>& bytes) {
  for (std::byte b : bytes) g_digest = (g_digest ^ static_cast<uint8_t>(b)) * 1099511628211ull;
}

// One step: every tensor of `order` submitted asynchronously, then each waited for and checked.
// `reshaped`: this rank sends that tensor with one element more; `refused`: the tensor whose
// handle must fail with the coordinator's mismatch error.
void step(hvrun::Worker& w, int j, const std::vector<int>& order,
          const std::vector<int>& contributors, int reshaped = -1, int refused = -1,
          std::chrono::microseconds spacing = {}, std::chrono::microseconds before_wait = {},
          bool polled = false) {
  std::vector<std::vector<std::byte>> data(kTensors);
  std::vector<hvrun::Handle> handles(kTensors);
  for (int k : order) {
    const TensorSpec& s = kSpecs[k];
    const int64_t count = s.count + (k == reshaped ? 1 : 0);
    data[k].resize(static_cast<size_t>(count) * hvrun::dtype_size(s.dtype));
    for (int64_t i = 0; i < count; ++i)
      hvrun::test::store_value(data[k].data(), static_cast<size_t>(i), s.dtype,
                               value(w.rank(), k, i, j, s.dtype));
    handles[k] = w.allreduce_async(
        s.name, hvrun::TensorView{data[k].data(), s.dtype, {count}},
        {.op = s.op, .prescale = s.prescale, .postscale = s.postscale});
    if (spacing.count() > 0) std::this_thread::sleep_for(spacing);
  }
  if (before_wait.count() > 0) std::this_thread::sleep_for(before_wait);
  for (int k : order) {
    const TensorSpec& s = kSpecs[k];
    const std::string what = std::string(s.name) + " step " + std::to_string(j);
    if (polled) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!handles[k].poll() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      if (!handles[k].poll()) {
        fail(what + ": not complete 10 s after its submission, and nobody waits for it");
        continue;
      }
    }
    hvrun::Status status = polled ? handles[k].status() : w.wait(handles[k]);
    if (k == refused) {
      if (status.is_ok() || status.message().find("different metadata") == std::string::npos)
        fail(what + ": expected the coordinator's mismatch error, got " + status.to_string());
      continue;
    }
    if (!status.is_ok()) {
      fail(what + ": " + status.to_string());
      continue;
    }
    for (int64_t i = 0; i < s.count; ++i) {
      const double got = hvrun::test::load_value(data[k].data(), static_cast<size_t>(i), s.dtype);
      const double want = reference(s, k, i, j, contributors);
      if (std::abs(got - want) > tolerance(s.dtype, want)) {
        fail(what + " [" + std::to_string(i) + "] = " + std::to_string(got) + ", want " +
             std::to_string(want));
        break;
      }
    }
  }
  // In tensor order, whatever the submission order, so every mode's digest compares.
  for (int k = 0; k < kTensors; ++k)
    if (k != refused) digest(data[k]);
}

std::vector<int> in_order() {
  std::vector<int> order;
  for (int k = 0; k < kTensors; ++k) order.push_back(k);
  return order;
}

std::vector<int> everyone(const hvrun::Worker& w) {
  std::vector<int> ranks;
  for (int r = 0; r < w.size(); ++r) ranks.push_back(r);
  return ranks;
}

void steady(hvrun::Worker& w) {
  for (int j = 0; j < 40; ++j) step(w, j, in_order(), everyone(w));
}

void own_order(hvrun::Worker& w) {
  std::vector<int> order = in_order();
  // Rank r starts at tensor 2r: every rank's order differs.
  std::rotate(order.begin(), order.begin() + (2 * w.rank()) % kTensors, order.end());
  if (w.rank() % 2 == 1) std::reverse(order.begin(), order.end());
  for (int j = 0; j < 40; ++j) step(w, j, order, everyone(w));
}

void late(hvrun::Worker& w) {
  for (int j = 0; j < 24; ++j) {
    const bool lateness = j % 4 == 3;
    if (lateness && w.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const auto start = std::chrono::steady_clock::now();
    step(w, j, in_order(), everyone(w));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // Waiting only for the lateness (30 ms) plus the coordinator; a rank that waited in rounds
    // well past its 2 ms wait would hold its step much longer on a loaded host too.
    if (w.rank() == 0 && ms > 2000) fail("step " + std::to_string(j) + " took " + std::to_string(ms) + " ms");
  }
}

void mismatch(hvrun::Worker& w) {
  for (int j = 0; j < 20; ++j)
    step(w, j, in_order(), everyone(w), j == 10 && w.rank() == 1 ? 3 : -1, j == 10 ? 3 : -1);
}

void join(hvrun::Worker& w) {
  const int steps = w.rank() == 0 ? 20 : 10;
  for (int j = 0; j < steps; ++j)
    step(w, j, in_order(), j < 10 ? everyone(w) : std::vector<int>{0});
  auto last = w.join();
  if (!last.is_ok() || *last != 0) fail("join: the last joined rank should be 0");
}

void spaced(hvrun::Worker& w) {
  using std::chrono::microseconds;
  for (int j = 0; j < 30; ++j)
    step(w, j, in_order(), everyone(w), -1, -1, microseconds(300), microseconds(5000));
}

void polled(hvrun::Worker& w) {
  for (int j = 0; j < 30; ++j) step(w, j, in_order(), everyone(w), -1, -1, {}, {}, true);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto config = hvrun::Config::from_environment();
  if (!config.is_ok()) {
    std::fprintf(stderr, "config: %s\n", config.status().to_string().c_str());
    return 2;
  }
  if (mode == "late") config->fast_path.wait = std::chrono::milliseconds(2);
  auto init = hvrun::Worker::init(*config);
  if (!init.is_ok()) {
    std::fprintf(stderr, "init: %s\n", init.status().to_string().c_str());
    return 2;
  }
  hvrun::Worker& w = **init;
  if (mode == "steady") steady(w);
  else if (mode == "order") own_order(w);
  else if (mode == "late") late(w);
  else if (mode == "mismatch") mismatch(w);
  else if (mode == "join") join(w);
  else if (mode == "spaced") spaced(w);
  else if (mode == "polled") polled(w);
  else fail("unknown mode '" + mode + "'");
  hvrun::Status down = w.shutdown();
  if (!down.is_ok()) fail("shutdown: " + down.to_string());
  std::printf("digest %016llx\n", static_cast<unsigned long long>(g_digest));
  if (g_failures == 0) std::printf("rank %d: %s ok\n", w.rank(), mode.c_str());
  std::fflush(stdout);
  return g_failures == 0 ? 0 : 1;
}
