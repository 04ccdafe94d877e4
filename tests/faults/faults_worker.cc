// hvrun_faults_worker: one rank of a fault or join test job (started by run_job,
// tests/support/worker_job.h, or by the real hvrun). Each mode exits 0 when what it saw is what
// the mode expects, else non-zero with a FAIL line on stderr.
//
//   uneven-train            ranks run 3, 5, 7, ... batches of Average allreduce then join; every
//                           rank must end with the same weights, equal to a reference
//   joined-ops [all]        rank 0 joins at once; the others run allgather, broadcast (and one
//                           from the joined root, which must fail), alltoall, reducescatter and
//                           allreduce Sum/Average/Min/Max/Product (`all`: Average over all ranks)
//   stall                   rank 1 submits 3 s after rank 0 (the coordinator warns meanwhile)
//   stall-on-set            the same on process set {1, 2}: rank 2 is late
//   stall-steady R          10 steps of two async allreduces (cached after the first: on shm
//                           and across hosts they run without the coordinator), then rank R
//                           submits step 10's 3 s late (the coordinator warns meanwhile)
//   kill-in-allreduce       rank 1 SIGKILLs itself inside a 64 MiB allreduce (once its first
//                           elements hold the sum, before its last do); the others' handles
//                           must fail (SIGTERM ignored so they can report it)
//   coordinator-lost        after a barrier every rank writes $FAULTS_READY_DIR/ready.<rank> and
//                           waits on a collective nobody completes; the test kills the
//                           coordinator: the handle must fail naming its address
//   stopped                 rank 1 stops itself (SIGSTOP); the others must fail with the
//                           coordinator's heartbeat abort naming it, then each writes
//                           $FAULTS_READY_DIR/failed.<rank>; once all have, a child of rank 1
//                           kills it (or after 25 s, so that nothing outlives the test)
#include <sched.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/support/worker_checks.h"

namespace {

using hvrun::DataType;
using hvrun::Handle;
using hvrun::ReduceOp;
using Clock = std::chrono::steady_clock;

using hvrun::test::fail;
using hvrun::test::failures;

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// ---- uneven-train ---------------------------------------------------------------------------

constexpr int kWeights = 16;
int batches_of(int rank) { return 3 + 2 * rank; }
double gradient(int rank, int step, int i) { return 0.01 * (rank + 1) * (i + 1) + 0.001 * step; }

int run_uneven_train(hvrun::Worker& w) {
  std::vector<double> weights(kWeights, 0.0);
  for (int step = 0; step < batches_of(w.rank()); ++step) {
    std::vector<double> grad(kWeights);
    for (int i = 0; i < kWeights; ++i) grad[i] = gradient(w.rank(), step, i);
    hvrun::Status s = w.allreduce("grad", hvrun::TensorView{grad.data(), DataType::kFloat64, {kWeights}},
                                  {ReduceOp::kAverage});
    if (!s.is_ok()) return fail("step " + std::to_string(step) + ": " + s.to_string()), 1;
    for (int i = 0; i < kWeights; ++i) weights[i] -= 0.1 * grad[i];
  }
  auto last = w.join();
  if (!last.is_ok()) return fail("join: " + last.status().to_string()), 1;
  if (*last != w.size() - 1) return fail("join returned " + std::to_string(*last)), 1;

  // Reference: in step k the ranks with more than k batches contribute, Average over them.
  std::vector<double> reference(kWeights, 0.0);
  for (int step = 0; step < batches_of(w.size() - 1); ++step) {
    for (int i = 0; i < kWeights; ++i) {
      double sum = 0;
      int contributing = 0;
      for (int r = 0; r < w.size(); ++r) {
        if (step < batches_of(r)) sum += gradient(r, step, i), ++contributing;
      }
      reference[i] -= 0.1 * (sum / contributing);
    }
  }
  // The last rank to join took part in every step: everyone takes its weights (as a trainer
  // would), and every rank's own weights must already equal them and the reference.
  std::vector<double> mine = weights;
  if (!w.broadcast("weights", hvrun::TensorView{weights.data(), DataType::kFloat64, {kWeights}}, *last).is_ok())
    return fail("broadcast of the weights"), 1;
  auto all = w.allgather("weights.all", hvrun::ConstTensorView(weights.data(), DataType::kFloat64, {1, kWeights}));
  if (!all.is_ok()) return fail("allgather: " + all.status().to_string()), 1;
  const double* rows = reinterpret_cast<const double*>(all->bytes.data());
  for (int r = 0; r < w.size(); ++r) {
    if (std::memcmp(rows + r * kWeights, weights.data(), sizeof(double) * kWeights) != 0)
      fail("rank " + std::to_string(r) + " ends with other weights than rank " + std::to_string(w.rank()));
  }
  for (int i = 0; i < kWeights; ++i) {
    if (std::fabs(weights[i] - reference[i]) > 1e-12)
      fail("weight " + std::to_string(i) + " is " + std::to_string(weights[i]) + ", reference " +
           std::to_string(reference[i]));
  }
  if (w.rank() == *last && mine != weights) fail("the last rank's weights changed in broadcast");
  std::printf("rank %d: %d batches, joined; weights identical on every rank (w[0]=%.12f)\n",
              w.rank(), batches_of(w.rank()), weights[0]);
  return failures() == 0 ? 0 : 1;
}

// ---- joined-ops -----------------------------------------------------------------------------

// Rank r's value i for the allreduce checks (ranks 1 and 2 contribute; rank 0 joined).
double value_of(int rank, int i) { return static_cast<double>(rank * 3 + i % 4 + 1); }

template <typename T>
void check_reduce(hvrun::Worker& w, DataType dtype, ReduceOp op, const char* op_name,
                  bool average_over_all) {
  constexpr int n = 6;
  std::vector<T> data(n);
  for (int i = 0; i < n; ++i) data[i] = static_cast<T>(value_of(w.rank(), i));
  std::string name = std::string("joined.") + op_name + "." + hvrun::dtype_name(dtype).data();
  hvrun::Status s = w.allreduce(name, hvrun::TensorView{data.data(), dtype, {n}}, {op});
  if (!s.is_ok()) return fail(name + ": " + s.to_string());
  for (int i = 0; i < n; ++i) {
    double a = value_of(1, i), b = value_of(2, i);
    double want = op == ReduceOp::kSum       ? a + b
                  : op == ReduceOp::kMin     ? std::min(a, b)
                  : op == ReduceOp::kMax     ? std::max(a, b)
                  : op == ReduceOp::kProduct ? a * b
                                             : (a + b) / (average_over_all ? w.size() : 2);
    if (dtype == DataType::kInt32) want = std::trunc(want);
    if (std::fabs(static_cast<double>(data[i]) - want) > 1e-5 * std::max(1.0, std::fabs(want)))
      return fail(name + "[" + std::to_string(i) + "] = " + std::to_string(static_cast<double>(data[i])) +
                  ", want " + std::to_string(want) + " (joined rank 0 must contribute the identity)");
  }
}

int run_joined_ops(hvrun::Worker& w, bool average_over_all) {
  if (w.size() != 3) return fail("joined-ops needs 3 ranks"), 1;
  if (w.rank() == 0) {
    auto last = w.join();
    if (!last.is_ok() || *last != 2) return fail("rank 0 join: " + (last.is_ok() ? std::to_string(*last) : last.status().to_string())), 1;
    std::printf("rank 0: joined; last joined rank %d\n", *last);
    return 0;
  }
  const int me = w.rank();
  // Allgather: rank r gives r rows of 2; the joined rank gives none.
  std::vector<float> rows(static_cast<size_t>(me * 2));
  for (int i = 0; i < me * 2; ++i) rows[i] = static_cast<float>(me * 10 + i);
  auto gathered = w.allgather("joined.allgather", hvrun::ConstTensorView(rows.data(), DataType::kFloat32, {me, 2}));
  if (!gathered.is_ok()) {
    fail("allgather: " + gathered.status().to_string());
  } else {
    std::vector<float> want = {10, 11, 20, 21, 22, 23};
    std::vector<float> got(want.size());
    if (gathered->shape != std::vector<int64_t>{3, 2} || gathered->bytes.size() != sizeof(float) * 6)
      fail("allgather shape with a joined rank");
    else if (std::memcpy(got.data(), gathered->bytes.data(), sizeof(float) * 6), got != want)
      fail("allgather rows with a joined rank");
  }
  // Broadcast from a root that has not joined.
  std::vector<int32_t> bc(5, me);
  hvrun::Status s = w.broadcast("joined.broadcast", hvrun::TensorView{bc.data(), DataType::kInt32, {5}}, 2);
  if (!s.is_ok() || bc != std::vector<int32_t>(5, 2)) fail("broadcast from rank 2: " + s.to_string());
  // Broadcast from the joined root: a clear error on every rank that submitted it.
  s = w.broadcast("joined.broadcast.from-joined", hvrun::TensorView{bc.data(), DataType::kInt32, {5}}, 0);
  if (s.is_ok() || s.message().find("joined") == std::string::npos ||
      s.message().find("root rank 0") == std::string::npos)
    fail("broadcast from the joined rank 0 should fail naming it, got " + s.to_string());
  else
    std::printf("rank %d: broadcast from joined root failed as expected: %s\n", me, s.message().c_str());
  // Alltoall: rank r sends r rows to rank 0 (which drops them), 1 row to rank 1, 2 rows to rank 2.
  std::vector<int64_t> splits = {me, 1, 2};
  std::vector<double> send;
  for (int dst = 0; dst < 3; ++dst)
    for (int64_t k = 0; k < splits[dst] * 3; ++k) send.push_back(me * 100 + dst * 10 + static_cast<double>(k));
  auto exchanged = w.alltoall("joined.alltoall",
                              hvrun::ConstTensorView(send.data(), DataType::kFloat64, {static_cast<int64_t>(send.size() / 3), 3}),
                              splits);
  if (!exchanged.is_ok()) {
    fail("alltoall: " + exchanged.status().to_string());
  } else {
    std::vector<double> want;
    for (int src = 1; src <= 2; ++src)
      for (int64_t k = 0; k < (me == 1 ? 1 : 2) * 3; ++k) want.push_back(src * 100 + me * 10 + static_cast<double>(k));
    std::vector<double> got(exchanged->bytes.size() / sizeof(double));
    std::memcpy(got.data(), exchanged->bytes.data(), exchanged->bytes.size());
    if (got != want) fail("alltoall with a joined rank: wrong rows");
  }
  // Reducescatter of 7 rows: rank 1 gets rows 3-4, rank 2 rows 5-6; rank 0 contributes zeros.
  std::vector<float> rs(7);
  for (int i = 0; i < 7; ++i) rs[i] = static_cast<float>(me * 100 + i);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    auto scattered = w.reducescatter(std::string("joined.reducescatter.") + hvrun::reduce_op_name(op).data(),
                                     hvrun::ConstTensorView(rs.data(), DataType::kFloat32, {7}), {op});
    if (!scattered.is_ok()) {
      fail("reducescatter: " + scattered.status().to_string());
      continue;
    }
    const int first = me == 1 ? 3 : 5;
    const float* out = reinterpret_cast<const float*>(scattered->bytes.data());
    for (int i = 0; i < 2; ++i) {
      float sum = static_cast<float>(300 + 2 * (first + i));
      float want = op == ReduceOp::kSum ? sum : sum / (average_over_all ? 3.0f : 2.0f);
      if (scattered->shape != std::vector<int64_t>{2} || std::fabs(out[i] - want) > 1e-4f)
        fail("reducescatter " + std::string(hvrun::reduce_op_name(op)) + " with a joined rank: got " +
             std::to_string(out[i]) + ", want " + std::to_string(want));
    }
  }
  // Allreduce identities for the joined rank, float and integer.
  const std::pair<ReduceOp, const char*> ops[] = {{ReduceOp::kSum, "sum"}, {ReduceOp::kAverage, "average"},
                                                  {ReduceOp::kMin, "min"}, {ReduceOp::kMax, "max"},
                                                  {ReduceOp::kProduct, "product"}};
  for (const auto& [op, name] : ops) {
    check_reduce<float>(w, DataType::kFloat32, op, name, average_over_all);
    check_reduce<int32_t>(w, DataType::kInt32, op, name, average_over_all);
    check_reduce<double>(w, DataType::kFloat64, op, name, average_over_all);
  }
  // Rank 1 joins; rank 2 runs one more allreduce alone (every other rank joined), joins last.
  if (me == 2) {
    std::vector<float> solo(3, 7.0f);
    s = w.allreduce("joined.solo", hvrun::TensorView{solo.data(), DataType::kFloat32, {3}}, {ReduceOp::kProduct});
    if (!s.is_ok() || solo[0] != 7.0f) fail("allreduce with every other rank joined: " + s.to_string());
  }
  auto last = w.join();
  if (!last.is_ok() || *last != 2)
    fail("join: " + (last.is_ok() ? "returned " + std::to_string(*last) : last.status().to_string()));
  std::printf("rank %d: every op worked with joined ranks, %d failures\n", me, failures());
  return failures() == 0 ? 0 : 1;
}

// ---- stall ----------------------------------------------------------------------------------

int run_stall(hvrun::Worker& w) {
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  std::vector<float> data(4, 1.0f);
  hvrun::TensorView view{data.data(), DataType::kFloat32, {4}};
  if (w.rank() == 1) {
    // The stall under test, not a sync (FAULTS_STALL_SECONDS: longer, for manual checks).
    const char* seconds = std::getenv("FAULTS_STALL_SECONDS");
    std::this_thread::sleep_for(std::chrono::seconds(seconds ? std::atoi(seconds) : 3));
    std::fprintf(stderr, "rank 1: submitting stalled.tensor now, 3 s late\n");
    std::fflush(stderr);
  }
  hvrun::Status s = w.allreduce("stalled.tensor", view);
  if (!s.is_ok()) return fail("stalled.tensor: " + s.to_string()), 1;
  return 0;
}

// ---- stall-steady ---------------------------------------------------------------------------

int run_stall_steady(hvrun::Worker& w, int late_rank) {
  std::vector<float> a(1000), b(10);
  for (int step = 0; step <= 10; ++step) {
    std::fill(a.begin(), a.end(), 1.0f);
    std::fill(b.begin(), b.end(), 2.0f);
    if (step == 10 && w.rank() == late_rank) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      std::fprintf(stderr, "rank %d: submitting step 10 now, 3 s late\n", late_rank);
      std::fflush(stderr);
    }
    const hvrun::Handle ha =
        w.allreduce_async("steady.a", hvrun::TensorView{a.data(), DataType::kFloat32, {1000}});
    const hvrun::Handle hb =
        w.allreduce_async("steady.b", hvrun::TensorView{b.data(), DataType::kFloat32, {10}});
    for (const hvrun::Handle* h : {&ha, &hb})
      if (hvrun::Status s = w.wait(*h); !s.is_ok())
        return fail("step " + std::to_string(step) + ": " + s.to_string()), 1;
    const auto n = static_cast<float>(w.size());
    if (a[0] != n || a[999] != n || b[0] != 2 * n)
      return fail("step " + std::to_string(step) + ": wrong sums"), 1;
  }
  return 0;
}

// ---- stall-on-set ---------------------------------------------------------------------------

// Process set {1, 2}: rank 2 submits 3 s after rank 1; the warning names the set and rank 2.
int run_stall_on_set(hvrun::Worker& w) {
  auto set = w.add_process_set(std::vector<int>{1, 2});
  if (!set.is_ok()) return fail("add_process_set: " + set.status().to_string()), 1;
  if (w.rank() != 0) {
    std::vector<float> data(4, 1.0f);
    hvrun::TensorView view{data.data(), DataType::kFloat32, {4}};
    if (w.rank() == 2) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      std::fprintf(stderr, "rank 2: submitting set.tensor now, 3 s late\n");
      std::fflush(stderr);
    }
    hvrun::Status s = w.allreduce("set.tensor", view, {.process_set = *set});
    if (!s.is_ok()) return fail("set.tensor: " + s.to_string()), 1;
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(4));  // the barrier is no stall of its own
  }
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  return 0;
}

// ---- kill-in-allreduce ----------------------------------------------------------------------

int run_kill_in_allreduce(hvrun::Worker& w) {
  std::signal(SIGTERM, SIG_IGN);  // report the failure ourselves; hvrun SIGKILLs after the grace
  std::vector<float> data(size_t{16} << 20, 1.0f);  // 64 MiB, filled before the ranks line up
  hvrun::TensorView view{data.data(), DataType::kFloat32, {static_cast<int64_t>(data.size())}};
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  auto start = Clock::now();
  Handle h = w.allreduce_async("big", view);
  if (w.rank() == 1) {
    // The data plane writes the sums back chunk by chunk from the front: the first element
    // holding the sum means every rank is inside the collective; the last one still holding
    // this rank's input means it has not finished. Read as atomics: the loop thread writes them.
    const float sum = static_cast<float>(w.size());
    auto value_at = [&data](size_t i) {
      return std::atomic_ref<float>(data[i]).load(std::memory_order_relaxed);
    };
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (value_at(0) != sum && Clock::now() < until) sched_yield();
    const bool started = value_at(0) == sum, finished = value_at(data.size() - 1) == sum;
    if (!started || finished)
      return fail(std::string("rank 1 could not die inside the allreduce: it ") +
                  (started ? "had finished" : "never started")), 1;
    std::fprintf(stderr, "rank 1: SIGKILL now, inside the allreduce\n");
    std::raise(SIGKILL);
  }
  hvrun::Status s = h.wait(std::chrono::seconds(60));
  long long took = ms_since(start);
  if (s.is_ok() || s.code() == hvrun::StatusCode::kDeadlineExceeded)
    return fail("the 64 MiB allreduce did not fail after rank 1 died: " + s.to_string()), 1;
  std::printf("rank %d: handle failed after %lld ms: %s\n", w.rank(), took, s.to_string().c_str());
  std::fflush(stdout);
  return took < 10000 ? 0 : (fail("took " + std::to_string(took) + " ms"), 1);
}

// ---- coordinator-lost -----------------------------------------------------------------------

int run_coordinator_lost(hvrun::Worker& w) {
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  std::vector<float> data(4, 1.0f);
  Handle h = w.allreduce_async("only.rank." + std::to_string(w.rank()),
                               hvrun::TensorView{data.data(), DataType::kFloat32, {4}});
  const char* dir = std::getenv("FAULTS_READY_DIR");
  if (dir == nullptr) return fail("FAULTS_READY_DIR not set"), 1;
  std::ofstream(std::string(dir) + "/ready." + std::to_string(w.rank())) << getpid() << "\n";
  hvrun::Status s = h.wait(std::chrono::seconds(30));
  const char* address = std::getenv("HVRUN_COORDINATOR_ADDR");
  if (s.is_ok() || s.code() == hvrun::StatusCode::kDeadlineExceeded ||
      s.message().find(address ? address : "?") == std::string::npos)
    return fail("after the coordinator died: " + s.to_string()), 1;
  std::printf("rank %d: failed as expected: %s\n", w.rank(), s.to_string().c_str());
  return 0;
}

// ---- stopped --------------------------------------------------------------------------------

int run_stopped(hvrun::Worker& w) {
  if (!w.barrier().is_ok()) return fail("barrier"), 1;
  const char* dir = std::getenv("FAULTS_READY_DIR");
  if (dir == nullptr) return fail("FAULTS_READY_DIR not set"), 1;
  auto failed_file = [dir](int rank) { return std::string(dir) + "/failed." + std::to_string(rank); };
  if (w.rank() == 1) {
    const pid_t me = getpid();
    std::vector<std::string> others_failed;  // made before fork: the child only polls them
    for (int r = 0; r < w.size(); ++r)
      if (r != 1) others_failed.push_back(failed_file(r));
    if (fork() == 0) {
      // The reaper ends the stopped rank once every other rank saw the heartbeat abort (its
      // death before that would be a lost stream instead), and so the test need not wait.
      const auto until = Clock::now() + std::chrono::seconds(25);
      auto all_failed = [&others_failed] {
        for (const std::string& path : others_failed)
          if (::access(path.c_str(), F_OK) != 0) return false;
        return true;
      };
      while (!all_failed() && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling for the files
      kill(me, SIGKILL);
      _exit(0);
    }
    std::raise(SIGSTOP);
    return 1;  // not reached
  }
  std::vector<float> data(4, 1.0f);
  auto start = Clock::now();
  hvrun::Status s = w.allreduce_async("waits.for.stopped", hvrun::TensorView{data.data(), DataType::kFloat32, {4}})
                        .wait(std::chrono::seconds(20));
  if (s.code() != hvrun::StatusCode::kAborted || s.message().find("rank 1") == std::string::npos ||
      s.message().find("heartbeat") == std::string::npos)
    return fail("after rank 1 stopped: " + s.to_string()), 1;
  std::printf("rank %d: failed after %lld ms as expected: %s\n", w.rank(), ms_since(start), s.to_string().c_str());
  std::fflush(stdout);
  std::ofstream(failed_file(w.rank())) << getpid() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  auto worker = hvrun::test::init_or_report();
  if (!worker) return 2;
  hvrun::Worker& w = *worker;
  int rc = 1;
  if (mode == "uneven-train") rc = run_uneven_train(w);
  else if (mode == "joined-ops") rc = run_joined_ops(w, argc > 2 && std::string(argv[2]) == "all");
  else if (mode == "stall") rc = run_stall(w);
  else if (mode == "stall-on-set") rc = run_stall_on_set(w);
  else if (mode == "stall-steady") rc = run_stall_steady(w, argc > 2 ? std::atoi(argv[2]) : 1);
  else if (mode == "kill-in-allreduce") rc = run_kill_in_allreduce(w);
  else if (mode == "coordinator-lost") rc = run_coordinator_lost(w);
  else if (mode == "stopped") rc = run_stopped(w);
  else std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  (void)w.shutdown();
  return rc;
}
