// hvrun_fast_path_worker: one rank of the fast-path tests (fast_path_test.cc). Blocking
// allreduces of negotiated tensors run without the coordinator (worker_lib/runtime/
// fast_path.h) when every rank is idle and calls the same one; everything else must go
// through the coordinator with the same results. Every result is checked against a reference.
//
//   dtypes          every dtype x op x size class (inline <= 16 B, spilled, over 16 KiB through
//                   the executor), scaled and not, 12 calls each
//   mixed           async bursts, blocking allreduces, broadcast, barrier, allgather interleaved
//   threads         three threads per rank, blocking allreduces on their own names: the ranks'
//                   threads meet in different orders (rounds disagree and fall back)
//   reshape         a name whose shape changes every call (4 to 12 bytes) beside a steady one
//                   (always 64 bytes), so the fast path's byte count tells which one ran there
//   skew            rank 1 late by 100 ms on every 4th call with a 2 ms fast-path wait: rank 0
//                   must fall back at its deadline (long before rank 1 comes, so those calls
//                   never run fast) and none of its calls may take much longer than the lateness
//   mixed-setting   rank 1 runs with --fast-path=false: rank 0 must not wait its deadline each
//                   call (300 calls in well under 300 x 50 ms)
//   join            ranks > 0 join after 20 calls, rank 0 goes on alone for 20 more
//   abort           rank 1 SIGKILLs itself after 50 calls; rank 0's next blocking allreduce
//                   must fail promptly, naming rank 1
//   peer-leaves     rank 1 shuts down after 20 calls; rank 0's 10 more calls each fail at once
//                   ("left the job") although the fast-path wait is 2 s
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/worker/tensor_values.h"

namespace {

using hvrun::DataType;
using hvrun::ReduceOp;

std::atomic<int> g_failures{0};

void fail(const std::string& what) {
  if (++g_failures <= 10) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
}

// Rank r's value at element i of call j: small integers, exact in every dtype.
double value(int rank, int64_t i, int j) { return 1 + rank + static_cast<double>(i % 5) + j % 3; }

double reference(ReduceOp op, DataType t, int size, int64_t i, int j, double pre, double post) {
  double acc = op == ReduceOp::kMin ? 1e300 : op == ReduceOp::kMax ? -1e300
               : op == ReduceOp::kProduct ? 1 : 0;
  for (int r = 0; r < size; ++r) {
    const double v = value(r, i, j) * pre;
    if (op == ReduceOp::kMin) acc = std::min(acc, v);
    else if (op == ReduceOp::kMax) acc = std::max(acc, v);
    else if (op == ReduceOp::kProduct) acc *= v;
    else acc += v;
  }
  if (op == ReduceOp::kAverage) {
    const bool integer = t == DataType::kUInt8 || t == DataType::kInt8 ||
                         t == DataType::kInt32 || t == DataType::kInt64;
    acc = integer ? std::trunc(acc / size) : acc / size;
  }
  return acc * post;
}

double tolerance(DataType t, double want) {
  switch (t) {
    case DataType::kFloat16: return std::abs(want) * 2e-3 + 1e-3;
    case DataType::kBFloat16: return std::abs(want) * 1e-2 + 1e-2;
    case DataType::kFloat32: return std::abs(want) * 1e-6;
    case DataType::kFloat64: return std::abs(want) * 1e-12;
    default: return 0;
  }
}

// One blocking allreduce of `count` elements of `t`, checked element by element.
void checked_allreduce(hvrun::Worker& w, const std::string& name, DataType t, ReduceOp op,
                       int64_t count, int j, double pre = 1, double post = 1) {
  std::vector<std::byte> data(static_cast<size_t>(count) * hvrun::dtype_size(t));
  for (int64_t i = 0; i < count; ++i)
    hvrun::test::store_value(data.data(), static_cast<size_t>(i), t, value(w.rank(), i, j));
  hvrun::AllreduceOptions options{.op = op, .prescale = pre, .postscale = post};
  hvrun::Status s = w.allreduce(name, hvrun::TensorView{data.data(), t, {count}}, options);
  if (!s.is_ok()) return fail(name + " call " + std::to_string(j) + ": " + s.to_string());
  for (int64_t i = 0; i < count; ++i) {
    const double got = hvrun::test::load_value(data.data(), static_cast<size_t>(i), t);
    const double want = reference(op, t, w.size(), i, j, pre, post);
    if (std::abs(got - want) > tolerance(t, want))
      return fail(name + " call " + std::to_string(j) + " [" + std::to_string(i) + "] = " +
                  std::to_string(got) + ", want " + std::to_string(want));
  }
}

void dtypes(hvrun::Worker& w) {
  const DataType types[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt32,
                            DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
                            DataType::kFloat32, DataType::kFloat64};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  // 1 and 4 elements travel inline (<= 16 bytes of float32 work type), 100 and 3000 in the
  // round's spill area, 5000 (20000 bytes of work type) through the executor once agreed.
  const int64_t counts[] = {1, 4, 100, 3000, 5000};
  for (DataType t : types)
    for (ReduceOp op : ops) {
      const bool small_ints = t == DataType::kUInt8 || t == DataType::kInt8;
      if (op == ReduceOp::kProduct && small_ints) continue;  // 8-bit products overflow
      for (int64_t n : counts) {
        const std::string name = "dt." + std::to_string(static_cast<int>(t)) + "." +
                                 std::to_string(static_cast<int>(op)) + "." + std::to_string(n);
        for (int j = 0; j < 12; ++j) checked_allreduce(w, name, t, op, n, j);
      }
    }
  // Scaling, in the float types (powers of two: exact).
  for (DataType t : {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64})
    for (int64_t n : {int64_t{1}, int64_t{100}, int64_t{5000}})
      for (int j = 0; j < 12; ++j)
        checked_allreduce(w, "scaled." + std::to_string(static_cast<int>(t)) + "." +
                                 std::to_string(n),
                          t, ReduceOp::kAverage, n, j, 2.0, 0.5);
}

void mixed(hvrun::Worker& w) {
  for (int step = 0; step < 60; ++step) {
    std::vector<std::vector<float>> grads(3, std::vector<float>(1000));
    std::vector<hvrun::Handle> handles;
    for (int g = 0; g < 3; ++g) {
      std::fill(grads[g].begin(), grads[g].end(), static_cast<float>(w.rank() + g + step));
      handles.push_back(w.allreduce_async("grad." + std::to_string(g),
                                          hvrun::TensorView{grads[g].data(), DataType::kFloat32, {1000}}));
    }
    for (int g = 0; g < 3; ++g) {
      hvrun::Status s = w.wait(handles[g]);
      const float want = static_cast<float>(w.size() * (g + step) + w.size() * (w.size() - 1) / 2);
      if (!s.is_ok() || grads[g][999] != want)
        fail("grad " + std::to_string(g) + " step " + std::to_string(step) + ": " + s.to_string());
    }
    checked_allreduce(w, "loss", DataType::kFloat32, ReduceOp::kAverage, 1, step);
    if (step % 5 == 0) {
      const int root = step % w.size();
      std::vector<int32_t> b(3, w.rank() * 100 + step);
      hvrun::Status s = w.broadcast("bc", hvrun::TensorView{b.data(), DataType::kInt32, {3}}, root);
      if (!s.is_ok() || b[2] != root * 100 + step) fail("broadcast step " + std::to_string(step));
    }
    if (step % 7 == 0 && !w.barrier().is_ok()) fail("barrier step " + std::to_string(step));
    if (step % 11 == 0) {
      std::vector<int32_t> rows(static_cast<size_t>(w.rank() + 1), w.rank());
      auto got = w.allgather("ag", hvrun::ConstTensorView(rows.data(), DataType::kInt32,
                                                          {static_cast<int64_t>(rows.size())}));
      const int64_t want_rows = static_cast<int64_t>(w.size()) * (w.size() + 1) / 2;
      if (!got.is_ok() || got->shape.at(0) != want_rows) fail("allgather step " + std::to_string(step));
    }
    checked_allreduce(w, "metric", DataType::kInt64, ReduceOp::kMax, 2, step);
  }
}

void threads(hvrun::Worker& w) {
  std::vector<std::thread> pool;
  for (int t = 0; t < 3; ++t)
    pool.emplace_back([&w, t] {
      for (int j = 0; j < 150; ++j)
        checked_allreduce(w, "thread." + std::to_string(t), DataType::kFloat32, ReduceOp::kSum,
                          1 + t, j);
    });
  for (auto& th : pool) th.join();
}

void reshape(hvrun::Worker& w) {
  for (int j = 0; j < 60; ++j) {
    checked_allreduce(w, "reshaped", DataType::kInt32, ReduceOp::kSum, 1 + j % 3, j);
    checked_allreduce(w, "steady", DataType::kInt32, ReduceOp::kSum, 16, j);
  }
}

// Rank 1's lateness: fifty times rank 0's 2 ms fast-path wait, so a rank 0 that fell back at
// its deadline never meets rank 1 in the round even when it is descheduled for a while.
constexpr auto kLateness = std::chrono::milliseconds(100);

void skew(hvrun::Worker& w) {
  std::chrono::duration<double> slowest{0};
  for (int j = 0; j < 40; ++j) {
    if (w.rank() == 1 && j % 4 == 0) std::this_thread::sleep_for(kLateness);
    const auto start = std::chrono::steady_clock::now();
    checked_allreduce(w, "skewed", DataType::kFloat32, ReduceOp::kSum, 3, j);
    slowest = std::max<std::chrono::duration<double>>(slowest, std::chrono::steady_clock::now() - start);
  }
  // A late call costs rank 0 the lateness and a coordinator round trip; a rank that waited for
  // its peer past the deadline (up to a quarter of the op timeout) would take far longer.
  if (w.rank() == 0 && slowest > kLateness + std::chrono::seconds(1))
    fail("rank 0's slowest call took " + std::to_string(slowest.count()) + " s with rank 1 " +
         std::to_string(kLateness.count()) + " ms late and a 2 ms fast-path wait");
}

void mixed_setting(hvrun::Worker& w) {
  const auto start = std::chrono::steady_clock::now();
  for (int j = 0; j < 300; ++j) checked_allreduce(w, "m", DataType::kFloat32, ReduceOp::kSum, 1, j);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Waiting out the 50 ms deadline each call would take 15 s.
  if (s > 6) fail("300 allreduces took " + std::to_string(s) + " s: a rank waited for a peer "
                  "that runs without the fast path");
}

void join(hvrun::Worker& w) {
  const int calls = w.rank() == 0 ? 40 : 20;
  for (int j = 0; j < calls; ++j) {
    std::vector<float> v(2, static_cast<float>(w.rank() + 1));
    hvrun::Status s = w.allreduce("joined", hvrun::TensorView{v.data(), DataType::kFloat32, {2}},
                                  {.op = ReduceOp::kAverage});
    // Every rank for the first 20 calls, then rank 0 alone (Average over the contributors).
    const float want = j < 20 ? static_cast<float>(w.size() + 1) / 2 : 1.0f;
    if (!s.is_ok() || v[1] != want)
      fail("joined call " + std::to_string(j) + ": " + s.to_string() + " got " +
           std::to_string(v[1]) + " want " + std::to_string(want));
  }
  auto last = w.join();
  if (!last.is_ok() || *last != 0) fail("join: last joined rank should be 0");
}

void abort_mid_run(hvrun::Worker& w) {
  const auto start = std::chrono::steady_clock::now();
  for (int j = 0;; ++j) {
    if (w.rank() == 1 && j == 50) raise(SIGKILL);
    float v = 1;
    hvrun::Status s = w.allreduce("a", hvrun::TensorView{&v, DataType::kFloat32, {1}});
    if (s.is_ok()) {
      if (j > 100000) return fail("rank 1 never went away");
      continue;
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (w.rank() != 0 || j < 50) return fail("unexpected failure at call " + std::to_string(j) + ": " + s.to_string());
    if (s.message().find("rank 1") == std::string::npos)
      fail("the failure does not name rank 1: " + s.to_string());
    if (took > 20) fail("the failure took " + std::to_string(took) + " s");
    std::printf("rank 0: failed as expected after %d calls: %s\n", j, s.to_string().c_str());
    return;
  }
}

void peer_leaves(hvrun::Worker& w) {
  for (int j = 0; j < 20; ++j) checked_allreduce(w, "p", DataType::kFloat32, ReduceOp::kSum, 1, j);
  if (w.rank() != 0) return;  // shuts down in main
  const auto start = std::chrono::steady_clock::now();
  for (int j = 0; j < 10; ++j) {
    float v = 1;
    hvrun::Status s = w.allreduce("p", hvrun::TensorView{&v, DataType::kFloat32, {1}});
    if (s.is_ok() || s.message().find("left the job") == std::string::npos)
      fail("call " + std::to_string(j) + " after rank 1 left: " + s.to_string());
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Waiting for the departed rank in each round would take 10 x 2 s.
  if (took > 5) fail("10 calls after rank 1 left took " + std::to_string(took) + " s");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* rank_text = std::getenv("HVRUN_RANK");
  const int rank = rank_text ? std::atoi(rank_text) : 0;
  auto config = hvrun::Config::from_environment();
  if (!config.is_ok()) {
    std::fprintf(stderr, "config: %s\n", config.status().to_string().c_str());
    return 2;
  }
  if (mode == "skew") config->fast_path.wait = std::chrono::milliseconds(2);
  if (mode == "peer-leaves") config->fast_path.wait = std::chrono::milliseconds(2000);
  if (mode == "mixed-setting" && rank == 1) config->fast_path.enabled = false;
  auto init = hvrun::Worker::init(*config);
  if (!init.is_ok()) {
    std::fprintf(stderr, "init: %s\n", init.status().to_string().c_str());
    return 2;
  }
  hvrun::Worker& w = **init;
  if (mode == "dtypes") dtypes(w);
  else if (mode == "mixed") mixed(w);
  else if (mode == "threads") threads(w);
  else if (mode == "reshape") reshape(w);
  else if (mode == "skew") skew(w);
  else if (mode == "mixed-setting") mixed_setting(w);
  else if (mode == "join") join(w);
  else if (mode == "abort") abort_mid_run(w);
  else if (mode == "peer-leaves") peer_leaves(w);
  else fail("unknown mode '" + mode + "'");
  if (mode != "abort") {
    hvrun::Status down = w.shutdown();
    if (!down.is_ok()) fail("shutdown: " + down.to_string());
  }
  if (g_failures == 0) std::printf("rank %d: %s ok\n", w.rank(), mode.c_str());
  std::fflush(stdout);
  if (mode == "abort") std::_Exit(g_failures == 0 ? 0 : 1);  // the job is aborted: no shutdown
  return g_failures == 0 ? 0 : 1;
}
