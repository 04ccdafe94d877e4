// hvrun_test_worker: one rank of a worker test job (started by run_job, tests/support/
// worker_job.h, with the environment hvrun sets). Each mode runs many checks in this one process
// and exits non-zero with a message on the first kind of failure it sees.
//
//   collectives [--large]   every collective x every dtype x sizes 0, 1, 1001 vs a reference
//   mismatch                shapes differ across ranks: every rank's handle must fail
//   timeout                 wait(200 ms) on a collective others submit late: must time out
//   join                    uneven steps then join: neutral contributions, last joined rank
//   abort                   rank 1 aborts: every rank's pending handle fails with kAborted
//   killed                  rank 1 is SIGKILLed: the others fail with kAborted naming it
//   killed-in-collective    rank 1 dies around a 64 MiB allreduce: the others fail, no hang
//   threads                 four threads submit and wait concurrently
//   names                   names that are not UTF-8 text fail at submission; the job goes on
//   second-init             init() again without shutdown(): kAlreadyExists at once
//   fail-exit               rank 1 leaves with shutdown_with_failure(): the others fail naming it
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/support/worker_checks.h"
#include "tests/worker/tensor_values.h"

namespace {

using hvrun::DataType;
using hvrun::Handle;
using hvrun::ReduceOp;
using hvrun::test::close_enough;
using hvrun::test::is_integer;
using hvrun::test::load_value;
using hvrun::test::store_value;

using hvrun::test::fail;
using hvrun::test::failures;

std::vector<std::byte> buffer_of(DataType t, int64_t n) {
  return std::vector<std::byte>(static_cast<size_t>(std::max<int64_t>(n, 1)) * hvrun::dtype_size(t));
}

// Small values every dtype holds exactly, signed when the dtype is.
double value(DataType t, int rank, int64_t i) {
  double v = static_cast<double>((rank * 3 + i * 7) % 8);
  return t == DataType::kUInt8 ? v : v - 3;
}
double product_value(int rank, int64_t i) { return 1.0 + static_cast<double>((rank + i) % 2); }

struct Case {
  std::string name;
  Handle handle;
  std::vector<std::byte> in, out;
  std::function<void(Case&)> check;
};

void compare(const std::string& name, const void* data, DataType t, int64_t n,
             const std::function<double(int64_t)>& want) {
  for (int64_t i = 0; i < n; ++i) {
    double got = load_value(data, static_cast<size_t>(i), t);
    double w = want(i);
    if (!close_enough(got, w, t)) {
      fail(name + "[" + std::to_string(i) + "]: got " + std::to_string(got) + ", want " +
           std::to_string(w));
      return;
    }
  }
}

double reduce_reference(ReduceOp op, DataType t, int size, int64_t i) {
  double acc = op == ReduceOp::kProduct ? 1 : op == ReduceOp::kMin ? 1e300 : op == ReduceOp::kMax ? -1e300 : 0;
  for (int r = 0; r < size; ++r) {
    double v = op == ReduceOp::kProduct ? product_value(r, i) : value(t, r, i);
    if (op == ReduceOp::kSum || op == ReduceOp::kAverage) acc += v;
    if (op == ReduceOp::kProduct) acc *= v;
    if (op == ReduceOp::kMin) acc = std::min(acc, v);
    if (op == ReduceOp::kMax) acc = std::max(acc, v);
  }
  if (op == ReduceOp::kAverage) acc = is_integer(t) ? std::trunc(acc / size) : acc / size;
  return acc;
}

void add_allreduce(hvrun::Worker& w, std::vector<std::unique_ptr<Case>>& cases, DataType t,
                   int64_t n, ReduceOp op, bool in_place, double prescale, double postscale) {
  auto c = std::make_unique<Case>();
  c->name = "allreduce." + std::string(hvrun::dtype_name(t)) + "." + std::to_string(n) + "." +
            std::string(hvrun::reduce_op_name(op)) + (in_place ? ".inplace" : "") +
            (prescale != 1 ? ".scaled" : "");
  c->in = buffer_of(t, n);
  c->out = buffer_of(t, n);
  int rank = w.rank();
  for (int64_t i = 0; i < n; ++i)
    store_value(c->in.data(), i, t, op == ReduceOp::kProduct ? product_value(rank, i) : value(t, rank, i));
  void* out = in_place ? c->in.data() : c->out.data();
  c->handle = w.allreduce_async(c->name, hvrun::ConstTensorView(c->in.data(), t, {n}),
                                hvrun::TensorView{out, t, {n}}, {op, prescale, postscale});
  int size = w.size();
  c->check = [t, n, op, in_place, size, prescale, postscale](Case& self) {
    const void* res = in_place ? self.in.data() : self.out.data();
    compare(self.name, res, t, n, [&](int64_t i) {
      return reduce_reference(op, t, size, i) * prescale * postscale;
    });
  };
  cases.push_back(std::move(c));
}

void add_allgather(hvrun::Worker& w, std::vector<std::unique_ptr<Case>>& cases, DataType t, int64_t n) {
  auto rows_of = [n](int r) { return n == 0 ? int64_t{0} : n + r; };
  auto c = std::make_unique<Case>();
  c->name = "allgather." + std::string(hvrun::dtype_name(t)) + "." + std::to_string(n);
  int64_t rows = rows_of(w.rank());
  c->in = buffer_of(t, rows * 2);
  for (int64_t i = 0; i < rows * 2; ++i) store_value(c->in.data(), i, t, value(t, w.rank(), i));
  c->handle = w.allgather_async(c->name, hvrun::ConstTensorView(c->in.data(), t, {rows, 2}));
  int size = w.size();
  c->check = [t, size, rows_of](Case& self) {
    hvrun::TensorView out = self.handle.output();
    int64_t total = 0;
    for (int r = 0; r < size; ++r) total += rows_of(r);
    if (out.shape != std::vector<int64_t>{total, 2}) return fail(self.name + ": wrong output shape");
    std::vector<double> want;
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < rows_of(r) * 2; ++i) want.push_back(value(t, r, i));
    compare(self.name, out.data, t, total * 2, [&](int64_t i) { return want[i]; });
  };
  cases.push_back(std::move(c));
}

void add_broadcast(hvrun::Worker& w, std::vector<std::unique_ptr<Case>>& cases, DataType t,
                   int64_t n, int root) {
  auto c = std::make_unique<Case>();
  c->name = "broadcast." + std::string(hvrun::dtype_name(t)) + "." + std::to_string(n);
  c->in = buffer_of(t, n);
  for (int64_t i = 0; i < n; ++i) store_value(c->in.data(), i, t, value(t, w.rank(), i));
  c->handle = w.broadcast_async(c->name, hvrun::TensorView{c->in.data(), t, {n}}, root);
  c->check = [t, n, root](Case& self) {
    compare(self.name, self.in.data(), t, n, [&](int64_t i) { return value(t, root, i); });
  };
  cases.push_back(std::move(c));
}

void add_alltoall(hvrun::Worker& w, std::vector<std::unique_ptr<Case>>& cases, DataType t, int64_t n) {
  int size = w.size();
  // Rows rank s sends to rank d; zero rows for some pairs on purpose.
  auto split = [n, size](int s, int d) {
    return n == 0 ? int64_t{0} : static_cast<int64_t>((s + 2 * d) % 3) + (n > 1 ? n / size : 0);
  };
  auto cell = [](int s, int d, int64_t j) { return static_cast<double>(s * 16 + d * 4 + j % 4); };
  auto c = std::make_unique<Case>();
  c->name = "alltoall." + std::string(hvrun::dtype_name(t)) + "." + std::to_string(n);
  std::vector<int64_t> splits;
  int64_t rows = 0;
  for (int d = 0; d < size; ++d) rows += split(w.rank(), d), splits.push_back(split(w.rank(), d));
  c->in = buffer_of(t, rows * 3);
  size_t at = 0;
  for (int d = 0; d < size; ++d)
    for (int64_t j = 0; j < split(w.rank(), d) * 3; ++j) store_value(c->in.data(), at++, t, cell(w.rank(), d, j));
  c->handle = w.alltoall_async(c->name, hvrun::ConstTensorView(c->in.data(), t, {rows, 3}), splits);
  int me = w.rank();
  c->check = [t, size, me, split, cell](Case& self) {
    std::vector<double> want;
    std::vector<int64_t> want_splits;
    for (int s = 0; s < size; ++s) {
      want_splits.push_back(split(s, me));
      for (int64_t j = 0; j < split(s, me) * 3; ++j) want.push_back(cell(s, me, j));
    }
    hvrun::TensorView out = self.handle.output();
    if (out.shape != std::vector<int64_t>{static_cast<int64_t>(want.size() / 3), 3})
      return fail(self.name + ": wrong output shape");
    if (self.handle.received_splits() != want_splits) return fail(self.name + ": wrong received splits");
    compare(self.name, out.data, t, static_cast<int64_t>(want.size()), [&](int64_t i) { return want[i]; });
  };
  cases.push_back(std::move(c));
}

void add_reducescatter(hvrun::Worker& w, std::vector<std::unique_ptr<Case>>& cases, DataType t,
                       int64_t n, ReduceOp op, double prescale = 1.0, double postscale = 1.0) {
  auto c = std::make_unique<Case>();
  c->name = "reducescatter." + std::string(hvrun::dtype_name(t)) + "." + std::to_string(n) + "." +
            std::string(hvrun::reduce_op_name(op)) + (prescale != 1 ? ".scaled" : "");
  c->in = buffer_of(t, n);
  for (int64_t i = 0; i < n; ++i) store_value(c->in.data(), i, t, value(t, w.rank(), i));
  c->handle = w.reducescatter_async(c->name, hvrun::ConstTensorView(c->in.data(), t, {n}),
                                    {op, prescale, postscale});
  int size = w.size(), me = w.rank();
  c->check = [t, n, op, size, me, prescale, postscale](Case& self) {
    int64_t base = n / size, extra = n % size;
    int64_t rows = base + (me < extra ? 1 : 0);
    int64_t first = me * base + std::min<int64_t>(me, extra);
    hvrun::TensorView out = self.handle.output();
    if (out.shape != std::vector<int64_t>{rows}) return fail(self.name + ": wrong output shape");
    compare(self.name, out.data, t, rows,
            [&](int64_t i) { return reduce_reference(op, t, size, first + i) * prescale * postscale; });
  };
  cases.push_back(std::move(c));
}

// Runs the whole matrix; called twice with the same names, so the second round negotiates
// through the coordinator's cache ids.
int run_collectives_round(hvrun::Worker& w, bool large) {
  std::vector<std::unique_ptr<Case>> cases;
  int k = 0;
  for (DataType t : hvrun::test::kAllDtypes) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1001}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct})
        add_allreduce(w, cases, t, n, op, (k++ % 2) == 0, 1.0, 1.0);
      add_allgather(w, cases, t, n);
      add_broadcast(w, cases, t, n, k++ % w.size());
      add_alltoall(w, cases, t, n);
      add_reducescatter(w, cases, t, n, ReduceOp::kSum);
      add_reducescatter(w, cases, t, n, ReduceOp::kAverage);
    }
  }
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16})
    add_allreduce(w, cases, t, 1001, ReduceOp::kSum, false, 0.5, 4.0);
  // Scale factors on reducescatter: exact in every floating type (powers of two).
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16})
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage})
      add_reducescatter(w, cases, t, 1001, op, 0.5, 4.0);

  // Grouped allreduce: three tensors negotiated and completed together.
  std::vector<std::vector<float>> group(3, std::vector<float>(17, static_cast<float>(w.rank() + 1)));
  std::vector<std::string> names = {"group.a", "group.b", "group.c"};
  std::vector<hvrun::TensorView> views;
  for (auto& g : group) views.push_back({g.data(), DataType::kFloat32, {17}});
  std::vector<Handle> group_handles = w.grouped_allreduce_async(names, views);

  if (large) {  // 64 MiB of float32
    int64_t n = int64_t{16} << 20;
    add_allreduce(w, cases, DataType::kFloat32, n, ReduceOp::kSum, true, 1.0, 1.0);
  }
  for (auto& c : cases) {
    hvrun::Status s = c->handle.wait(std::chrono::seconds(120));
    if (!s.is_ok()) {
      fail(c->name + ": " + s.to_string());
      continue;
    }
    c->check(*c);
  }
  float want = static_cast<float>(w.size() * (w.size() + 1) / 2);
  for (size_t g = 0; g < group.size(); ++g) {
    hvrun::Status s = group_handles[g].wait(std::chrono::seconds(60));
    if (!s.is_ok()) fail(names[g] + ": " + s.to_string());
    else if (group[g][16] != want) fail(names[g] + ": wrong value");
  }
  // A group naming one tensor twice is refused as a whole (nothing sent, nothing hangs).
  std::vector<std::string> twice = {"group.dup", "group.dup"};
  std::vector<hvrun::TensorView> two_views = {views[0], views[1]};
  for (const Handle& h : w.grouped_allreduce_async(twice, two_views))
    if (h.wait(std::chrono::seconds(5)).code() != hvrun::StatusCode::kAlreadyExists)
      fail("grouped allreduce with a repeated name was not refused");
  if (hvrun::Status s = w.barrier(); !s.is_ok()) fail("barrier: " + s.to_string());
  std::printf("rank %d: %zu cases checked, %d failures\n", w.rank(), cases.size() + 3, failures());
  return failures() == 0 ? 0 : 1;
}

int run_collectives(hvrun::Worker& w, bool large) {
  int rc = run_collectives_round(w, large);
  return rc != 0 ? rc : run_collectives_round(w, false);
}

int run_mismatch(hvrun::Worker& w) {
  std::vector<float> data(static_cast<size_t>(w.rank() + 1), 1.0f);
  hvrun::Status s = w.allreduce("mismatched", hvrun::TensorView{data.data(), DataType::kFloat32,
                                                               {w.rank() + 1}});
  if (s.is_ok()) return fail("mismatched shapes succeeded"), 1;
  std::printf("rank %d: mismatch failed as expected: %s\n", w.rank(), s.to_string().c_str());
  // The job goes on: a matching collective afterwards works.
  std::vector<float> ok(4, 1.0f);
  s = w.allreduce("after-mismatch", hvrun::TensorView{ok.data(), DataType::kFloat32, {4}});
  if (!s.is_ok() || ok[0] != static_cast<float>(w.size())) return fail("collective after mismatch: " + s.to_string()), 1;
  return 0;
}

int run_timeout(hvrun::Worker& w) {
  std::vector<float> data(8, 1.0f);
  hvrun::TensorView view{data.data(), DataType::kFloat32, {8}};
  if (w.rank() == 0) {
    Handle h = w.allreduce_async("late", view);
    auto start = std::chrono::steady_clock::now();
    hvrun::Status s = h.wait(std::chrono::milliseconds(200));
    auto waited = std::chrono::steady_clock::now() - start;
    if (w.size() > 1 && s.code() != hvrun::StatusCode::kDeadlineExceeded)
      return fail("wait(200ms) returned " + s.to_string()), 1;
    if (waited > std::chrono::seconds(2)) return fail("wait(200ms) blocked too long"), 1;
    std::printf("rank 0: wait timed out as expected: %s\n", s.to_string().c_str());
    // The same name again while the first is in flight (it cannot finish before the others
    // pass the barrier below): refused at once, the first goes on.
    hvrun::Status dup = w.allreduce_async("late", view).wait(std::chrono::seconds(5));
    if (w.size() > 1 && dup.code() != hvrun::StatusCode::kAlreadyExists)
      return fail("duplicate name returned " + dup.to_string()), 1;
    if (!w.barrier().is_ok()) return fail("barrier"), 1;
    if (!w.wait(h).is_ok()) return fail("late allreduce failed"), 1;
  } else {
    if (!w.barrier().is_ok()) return fail("barrier"), 1;
    if (!w.allreduce("late", view).is_ok()) return fail("late allreduce failed"), 1;
  }
  if (data[0] != static_cast<float>(w.size())) return fail("late allreduce wrong value"), 1;
  return 0;
}

int run_join(hvrun::Worker& w) {
  int steps = w.rank() + 1;
  for (int k = 0; k < steps; ++k) {
    std::vector<double> sum(5, w.rank() + 1.0), avg(5, w.rank() + 1.0), mn(5, w.rank() + 1.0);
    auto h1 = w.allreduce_async("step.sum." + std::to_string(k), hvrun::TensorView{sum.data(), DataType::kFloat64, {5}});
    auto h2 = w.allreduce_async("step.avg." + std::to_string(k), hvrun::TensorView{avg.data(), DataType::kFloat64, {5}}, {ReduceOp::kAverage});
    auto h3 = w.allreduce_async("step.min." + std::to_string(k), hvrun::TensorView{mn.data(), DataType::kFloat64, {5}}, {ReduceOp::kMin});
    // Allgather while some ranks joined: only the ranks still stepping contribute rows.
    std::vector<double> mine(static_cast<size_t>(w.rank() + 1), w.rank());
    auto h4 = w.allgather_async("step.gather." + std::to_string(k),
                                hvrun::ConstTensorView(mine.data(), DataType::kFloat64, {w.rank() + 1}));
    for (auto* h : {&h1, &h2, &h3, &h4})
      if (auto s = w.wait(*h); !s.is_ok()) return fail("step " + std::to_string(k) + ": " + s.to_string()), 1;
    std::vector<double> want_rows;
    for (int r = k; r < w.size(); ++r) want_rows.insert(want_rows.end(), static_cast<size_t>(r + 1), r);
    hvrun::TensorView gathered = h4.output();
    const double* g = static_cast<const double*>(gathered.data);
    if (gathered.shape != std::vector<int64_t>{static_cast<int64_t>(want_rows.size())} ||
        !std::equal(want_rows.begin(), want_rows.end(), g))
      return fail("step " + std::to_string(k) + ": allgather with joined ranks gave the wrong rows"), 1;
    // Ranks k..size-1 still contribute in step k.
    double want_sum = 0;
    for (int r = k; r < w.size(); ++r) want_sum += r + 1.0;
    double want_avg = want_sum / (w.size() - k);
    if (sum[0] != want_sum || avg[0] != want_avg || mn[0] != k + 1.0)
      return fail("step " + std::to_string(k) + ": got " + std::to_string(sum[0]) + "/" +
                  std::to_string(avg[0]) + "/" + std::to_string(mn[0])), 1;
  }
  auto last = w.join();
  if (!last.is_ok()) return fail("join: " + last.status().to_string()), 1;
  if (*last != w.size() - 1) return fail("join returned " + std::to_string(*last)), 1;
  std::printf("rank %d: join ok, last joined rank %d\n", w.rank(), *last);
  return 0;
}

int run_abort(hvrun::Worker& w) {
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  if (w.rank() == 1) {
    w.abort("test abort from rank 1");
  }
  std::vector<float> data(8, 1.0f);
  // Rank 1 never submits this; only the abort can end it.
  Handle h = w.rank() == 1 ? Handle() : w.allreduce_async("never", hvrun::TensorView{data.data(), DataType::kFloat32, {8}});
  if (w.rank() == 1) {
    Handle after = w.allreduce_async("after-abort", hvrun::TensorView{data.data(), DataType::kFloat32, {8}});
    hvrun::Status s = after.wait(std::chrono::seconds(20));
    if (s.code() != hvrun::StatusCode::kAborted) return fail("rank 1 after abort: " + s.to_string()), 1;
    return 0;
  }
  hvrun::Status s = h.wait(std::chrono::seconds(20));
  if (s.code() != hvrun::StatusCode::kAborted || s.message().find("test abort from rank 1") == std::string::npos)
    return fail("pending handle after abort: " + s.to_string()), 1;
  std::printf("rank %d: aborted as expected: %s\n", w.rank(), s.to_string().c_str());
  return 0;
}

// Rank 1 dies right after submitting a 64 MiB allreduce, so the others meet its death either
// in the coordinator (JobAbort) or inside the Gloo collective: either way their handles must
// fail promptly (bounded by HVRUN_OP_TIMEOUT at worst), never hang.
int run_killed_in_collective(hvrun::Worker& w) {
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  std::vector<float> data(size_t{16} << 20, 1.0f);
  hvrun::TensorView view{data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  Handle h = w.allreduce_async("big", view);
  if (w.rank() == 1) std::raise(SIGKILL);
  hvrun::Status s = h.wait(std::chrono::seconds(60));
  hvrun::Status next = w.allreduce_async("after", view).wait(std::chrono::seconds(60));
  if (s.is_ok() || next.is_ok() || s.code() == hvrun::StatusCode::kDeadlineExceeded)
    return fail("after rank 1 died: " + s.to_string() + " / " + next.to_string()), 1;
  std::printf("rank %d: failed as expected: %s / %s\n", w.rank(), s.to_string().c_str(),
              next.to_string().c_str());
  return 0;
}

// Several threads submit and wait at once (the API is thread-safe).
int run_threads(hvrun::Worker& w) {
  constexpr int kThreads = 4, kOps = 40;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kOps; ++k) {
        std::vector<int32_t> v(33, w.rank() + t);
        std::string name = "thread." + std::to_string(t) + "." + std::to_string(k);
        hvrun::Status s = w.allreduce(name, hvrun::TensorView{v.data(), DataType::kInt32, {33}});
        int want = w.size() * t + w.size() * (w.size() - 1) / 2;
        if (!s.is_ok() || v[32] != want) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  if (bad) return fail(std::to_string(bad.load()) + " threaded allreduces failed"), 1;
  std::printf("rank %d: %d threaded allreduces ok\n", w.rank(), kThreads * kOps);
  return 0;
}

// Rank 1 dies (SIGKILL) after a barrier; the others' pending collective must fail promptly
// with kAborted naming the lost rank, not hang.
int run_killed(hvrun::Worker& w) {
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  if (w.rank() == 1) std::raise(SIGKILL);
  std::vector<float> data(8, 1.0f);
  auto start = std::chrono::steady_clock::now();
  hvrun::Status s = w.allreduce_async("orphan", hvrun::TensorView{data.data(), DataType::kFloat32, {8}})
                        .wait(std::chrono::seconds(20));
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  if (s.code() != hvrun::StatusCode::kAborted || s.message().find("rank 1") == std::string::npos)
    return fail("after rank 1 died: " + s.to_string()), 1;
  std::printf("rank %d: failed in %lld ms as expected: %s\n", w.rank(),
              static_cast<long long>(took.count()), s.to_string().c_str());
  return 0;
}

// Every submission path refuses a name that is not UTF-8 text without NUL at once, on this
// rank, naming it and showing the name escaped; nothing reaches the coordinator, so the job's
// collectives go on (a valid non-ASCII name among them).
int run_names(hvrun::Worker& w) {
  std::vector<float> data(4, 1.0f);
  hvrun::TensorView view{data.data(), DataType::kFloat32, {4}};
  const std::vector<std::string> bad = {
      std::string("grad.\xff\xfe"),        // not UTF-8 at all
      std::string("nul\0inside", 10),      // NUL: no C string could carry it
      std::string("lone.\xed\xa0\x80"),    // an encoded surrogate (U+D800)
      std::string("overlong.\xc0\xaf"),    // an overlong '/'
      std::string("cut.\xe2\x82"),         // a sequence cut short
  };
  const std::string rank = "rank " + std::to_string(w.rank()) + ":";
  auto refused = [&](const std::string& what, const std::string& name, const Handle& h) {
    if (!h.poll()) return fail(what + ": the handle of a bad name is not complete at once");
    hvrun::Status s = h.status();
    if (s.code() != hvrun::StatusCode::kInvalidArgument ||
        s.message().find(rank) == std::string::npos ||
        s.message().find(hvrun::escaped_tensor_name(name)) == std::string::npos ||
        s.message().find("UTF-8") == std::string::npos)
      fail(what + " " + hvrun::escaped_tensor_name(name) + ": " + s.to_string());
  };
  for (const std::string& name : bad) {
    refused("allreduce", name, w.allreduce_async(name, view));
    refused("allgather", name, w.allgather_async(name, view));
    refused("broadcast", name, w.broadcast_async(name, view, 0));
    refused("reducescatter", name, w.reducescatter_async(name, view));
    std::vector<std::string> group = {"group.ok", name};
    std::vector<hvrun::TensorView> tensors = {view, view};
    for (const Handle& h : w.grouped_allreduce_async(group, tensors)) refused("group", name, h);
    hvrun::Status blocking = w.allreduce(name, view);
    if (blocking.code() != hvrun::StatusCode::kInvalidArgument)
      fail("blocking allreduce of a bad name: " + blocking.to_string());
  }
  hvrun::Status s = w.allreduce("grad.\xc3\xa9\xe2\x88\x91.\xf0\x9f\x98\x80", view);  // é∑😀
  if (!s.is_ok() || data[3] != static_cast<float>(w.size()))
    fail("allreduce of a valid UTF-8 name after the refusals: " + s.to_string());
  if (!w.barrier().is_ok()) fail("barrier after the refusals");
  if (failures()) return 1;
  std::printf("rank %d: bad names refused, job unharmed\n", w.rank());
  return 0;
}

// A second Worker::init() while this one lives would register as a new round and wait for one
// that cannot start; it must fail at once instead.
int run_second_init(hvrun::Worker& w) {
  const auto start = std::chrono::steady_clock::now();
  auto again = hvrun::Worker::init();
  const auto took = std::chrono::steady_clock::now() - start;
  if (again.is_ok()) return fail("a second init() while the first worker lives succeeded"), 1;
  const hvrun::Status& s = again.status();
  if (s.code() != hvrun::StatusCode::kAlreadyExists ||
      s.message().find("rank " + std::to_string(w.rank())) == std::string::npos ||
      s.message().find("shutdown()") == std::string::npos ||
      s.message().find("init after shutdown") != std::string::npos)
    return fail("second init: " + s.to_string()), 1;
  if (took > std::chrono::seconds(2))
    return fail("second init took " +
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
                " ms to fail"), 1;
  // The first worker is untouched by the refusal.
  if (!w.barrier().is_ok()) return fail("barrier after the refused init"), 1;
  std::printf("rank %d: second init refused at once: %s\n", w.rank(), s.message().c_str());
  return 0;
}

// Rank 1 ends because of an error of its own: instead of Goodbye, the coordinator hears a
// failure and aborts the job with its text, so the others' pending collective fails naming it.
int run_fail_exit(hvrun::Worker& w) {
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  if (w.rank() == 1) {
    hvrun::Status s = w.shutdown_with_failure("disk full while writing step 7");
    if (!s.is_ok()) return fail("shutdown_with_failure: " + s.to_string()), 1;
    std::printf("rank 1: left as failed\n");
    return 0;
  }
  std::vector<float> data(4, 1.0f);
  hvrun::Status s = w.allreduce_async("after.failure", hvrun::TensorView{data.data(), DataType::kFloat32, {4}})
                        .wait(std::chrono::seconds(20));
  const std::string cause = "job aborted: rank 1 on host localhost (pid ";
  if (s.code() != hvrun::StatusCode::kAborted || s.message().find(cause) == std::string::npos ||
      s.message().find(") failed: disk full while writing step 7") == std::string::npos)
    return fail("after rank 1 failed: " + s.to_string()), 1;
  std::printf("rank %d: failed as expected: %s\n", w.rank(), s.to_string().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "collectives";
  bool large = argc > 2 && std::string(argv[2]) == "--large";
  auto worker = hvrun::test::init_or_report();
  if (!worker) return 2;
  hvrun::Worker& w = *worker;
  int rc = 1;
  if (mode == "collectives") rc = run_collectives(w, large);
  else if (mode == "mismatch") rc = run_mismatch(w);
  else if (mode == "timeout") rc = run_timeout(w);
  else if (mode == "join") rc = run_join(w);
  else if (mode == "abort") rc = run_abort(w);
  else if (mode == "killed") rc = run_killed(w);
  else if (mode == "killed-in-collective") rc = run_killed_in_collective(w);
  else if (mode == "threads") rc = run_threads(w);
  else if (mode == "names") rc = run_names(w);
  else if (mode == "second-init") rc = run_second_init(w);
  else if (mode == "fail-exit") rc = run_fail_exit(w);
  else std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  hvrun::Status s = w.shutdown();
  if (!s.is_ok()) std::fprintf(stderr, "shutdown: %s\n", s.to_string().c_str());
  if (mode.rfind("killed", 0) != 0 && mode != "abort" && mode != "fail-exit") {
    // Shutdown is idempotent, and nothing can be submitted afterwards.
    if (!w.shutdown().is_ok()) rc = 1, std::fprintf(stderr, "FAIL: second shutdown\n");
    if (w.barrier().code() != hvrun::StatusCode::kFailedPrecondition)
      rc = 1, std::fprintf(stderr, "FAIL: barrier after shutdown did not fail\n");
  }
  return rc;
}
