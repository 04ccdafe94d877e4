// hvrun_test_process_sets: one rank of a process-set test job (run_job, tests/support/
// worker_job.h). Each mode runs its checks on the public API and exits non-zero after printing
// what failed.
//
//   disjoint     sets {even ranks} and {odd ranks}: every collective on each, Average counting the
//                set, broadcast from a member, a global allreduce between them
//   overlapping  sets {0..n-2} and {1..n-1}: members submit to both in opposite orders, async
//   churn        a set added and removed while another set's collectives are in flight
//   refusals     a non-member's call, a root outside the set, removal in flight, bad members,
//                a mismatch naming job ranks
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/support/worker_checks.h"

namespace {

using hvrun::DataType;
using hvrun::Handle;
using hvrun::ProcessSet;
using hvrun::ReduceOp;
using hvrun::Worker;
using hvrun::test::fail;

hvrun::TensorView view(std::vector<float>& v) {
  return hvrun::TensorView{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}};
}
hvrun::ConstTensorView rows(const std::vector<float>& v, int64_t row_count) {
  return hvrun::ConstTensorView{v.data(), DataType::kFloat32,
                                {row_count, static_cast<int64_t>(v.size()) / std::max<int64_t>(row_count, 1)}};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void check_ok(const hvrun::Status& s, const std::string& what) {
  if (!s.is_ok()) fail(what + ": " + s.to_string());
}

std::vector<float> floats_of(hvrun::OwnedTensor& t) {
  const auto* p = static_cast<const float*>(t.view().data);
  return std::vector<float>(p, p + t.view().elements());
}

ProcessSet add(Worker& w, std::vector<int> ranks) {
  auto set = w.add_process_set(ranks);
  if (!set.is_ok()) {
    fail("add_process_set: " + set.status().to_string());
    return ProcessSet{-1};
  }
  return *set;
}

// Every collective on `set` (members ascending in `members`), checked against the values.
void every_collective_on(Worker& w, ProcessSet set, const std::vector<int>& members,
                         const std::string& tag) {
  const int me = w.rank();
  const int k = static_cast<int>(members.size());
  const int position = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  const float member_sum = static_cast<float>(std::accumulate(members.begin(), members.end(), 0) + k);

  std::vector<float> x(5, static_cast<float>(me + 1));
  check_ok(w.allreduce(tag + ".sum", view(x), {.op = ReduceOp::kSum, .process_set = set}), tag + " sum");
  if (x[0] != member_sum) fail(tag + " sum: got " + std::to_string(x[0]) + ", want " + std::to_string(member_sum));

  std::vector<float> avg(3, static_cast<float>(me + 1));
  check_ok(w.allreduce(tag + ".avg", view(avg), {.op = ReduceOp::kAverage, .process_set = set}), tag + " avg");
  if (avg[0] != member_sum / static_cast<float>(k)) fail(tag + " average divides by the set's size");

  // Allgather: each member sends position+1 rows of its rank.
  std::vector<float> mine(static_cast<size_t>(position + 1) * 2, static_cast<float>(me));
  auto gathered = w.allgather(tag + ".gather", rows(mine, position + 1), set);
  check_ok(gathered.status(), tag + " allgather");
  if (gathered.is_ok()) {
    std::vector<float> want;
    for (int i = 0; i < k; ++i) want.insert(want.end(), static_cast<size_t>(i + 1) * 2, static_cast<float>(members[i]));
    if (floats_of(*gathered) != want) fail(tag + " allgather rows in member order");
  }

  const int root = members.back();
  std::vector<float> b(4, me == root ? 42.0f : -1.0f);
  check_ok(w.broadcast(tag + ".bcast", view(b), root, set), tag + " broadcast");
  if (b[0] != 42.0f) fail(tag + " broadcast from job rank " + std::to_string(root));

  // Alltoall: one row to each member, valued sender*100 + receiver position.
  std::vector<float> out(static_cast<size_t>(k));
  for (int j = 0; j < k; ++j) out[static_cast<size_t>(j)] = static_cast<float>(me * 100 + j);
  auto exchanged = w.alltoall(tag + ".a2a", rows(out, k), {}, set);
  check_ok(exchanged.status(), tag + " alltoall");
  if (exchanged.is_ok()) {
    std::vector<float> got = floats_of(*exchanged), want;
    for (int i = 0; i < k; ++i) want.push_back(static_cast<float>(members[i] * 100 + position));
    if (got != want) fail(tag + " alltoall");
  }

  // Reducescatter: k rows of ones; each member keeps one row of k... summed over the set.
  std::vector<float> ones(static_cast<size_t>(k) * 2, 1.0f);
  auto scattered = w.reducescatter(tag + ".rs", rows(ones, k), {.op = ReduceOp::kSum, .process_set = set});
  check_ok(scattered.status(), tag + " reducescatter");
  if (scattered.is_ok() && floats_of(*scattered) != std::vector<float>(2, static_cast<float>(k)))
    fail(tag + " reducescatter keeps one row per member, summed over the set");

  std::vector<float> g1(2, 1.0f), g2(3, 2.0f);
  std::vector<std::string> names{tag + ".g1", tag + ".g2"};
  std::vector<hvrun::TensorView> group{view(g1), view(g2)};
  for (Handle& h : w.grouped_allreduce_async(names, group, {.op = ReduceOp::kSum, .process_set = set}))
    check_ok(w.wait(h), tag + " grouped allreduce");
  if (g1[0] != static_cast<float>(k) || g2[0] != 2.0f * static_cast<float>(k)) fail(tag + " grouped allreduce");

  check_ok(w.barrier(set), tag + " barrier");
}

void disjoint(Worker& w) {
  std::vector<int> even, odd;
  for (int r = 0; r < w.size(); ++r) (r % 2 ? odd : even).push_back(r);
  ProcessSet even_set = add(w, even);
  ProcessSet odd_set = add(w, odd.empty() ? std::vector<int>{0} : odd);
  if (even_set.id != 1 || odd_set.id != 2) fail("ids count 1, 2 in call order");
  auto ranks = w.process_set_ranks(even_set);
  if (!ranks.is_ok() || *ranks != even) fail("process_set_ranks lists the members on every rank");
  if (w.process_sets().size() != 3) fail("process_sets lists the global set and both sets");
  for (int round = 0; round < 3; ++round) {  // again: the steady state runs on cache ids
    const bool is_even = w.rank() % 2 == 0;
    every_collective_on(w, is_even ? even_set : odd_set, is_even ? even : odd,
                        (is_even ? "even" : "odd") + std::to_string(round));
    std::vector<float> all(2, 1.0f);
    check_ok(w.allreduce("global" + std::to_string(round), view(all)), "global allreduce");
    if (all[0] != static_cast<float>(w.size())) fail("the global set still holds every rank");
  }
  std::printf("disjoint sets ok\n");
}

void overlapping(Worker& w) {
  const int n = w.size();
  std::vector<int> low(static_cast<size_t>(n - 1)), high(static_cast<size_t>(n - 1));
  std::iota(low.begin(), low.end(), 0);
  std::iota(high.begin(), high.end(), 1);
  ProcessSet a = add(w, low), b = add(w, high);
  const bool in_a = w.rank() < n - 1, in_b = w.rank() > 0;
  for (int step = 0; step < 20; ++step) {
    std::vector<float> va(64, static_cast<float>(w.rank())), vb(64, static_cast<float>(w.rank()));
    Handle ha, hb;
    const std::string s = std::to_string(step);
    // Ranks in both sets submit in opposite orders on even and odd ranks.
    if (w.rank() % 2 == 0) {
      if (in_a) ha = w.allreduce_async("a." + s, view(va), {.process_set = a});
      if (in_b) hb = w.allreduce_async("b." + s, view(vb), {.process_set = b});
    } else {
      if (in_b) hb = w.allreduce_async("b." + s, view(vb), {.process_set = b});
      if (in_a) ha = w.allreduce_async("a." + s, view(va), {.process_set = a});
    }
    const float sum_a = static_cast<float>((n - 1) * (n - 2) / 2), sum_b = static_cast<float>(n * (n - 1) / 2);
    if (in_a) { check_ok(w.wait(ha), "overlap a"); if (va[0] != sum_a) fail("overlap a value"); }
    if (in_b) { check_ok(w.wait(hb), "overlap b"); if (vb[0] != sum_b) fail("overlap b value"); }
  }
  std::printf("overlapping sets ok\n");
}

void churn(Worker& w) {
  const int n = w.size();
  std::vector<int> first{0, 1};
  ProcessSet busy = add(w, first);
  std::vector<float> held(1 << 16, 1.0f);
  Handle in_flight;
  // Rank 0's half is in flight through every add and remove below; rank 1 submits after them.
  if (w.rank() == 0) in_flight = w.allreduce_async("busy", view(held), {.process_set = busy});
  // Every rank adds and removes another set while "busy" may still run.
  std::vector<int> rest;
  for (int r = 1; r < n; ++r) rest.push_back(r);
  for (int round = 0; round < 3; ++round) {
    ProcessSet other = add(w, rest);
    if (w.rank() >= 1) {
      std::vector<float> v(8, 1.0f);
      check_ok(w.allreduce("other." + std::to_string(round), view(v), {.process_set = other}), "other");
      if (v[0] != static_cast<float>(n - 1)) fail("churned set's value");
    }
    check_ok(w.remove_process_set(other), "remove");
    if (w.process_set_ranks(other).is_ok()) fail("a removed set is gone on every rank");
  }
  if (w.rank() == 1) in_flight = w.allreduce_async("busy", view(held), {.process_set = busy});
  if (w.rank() < 2) {
    check_ok(w.wait(in_flight), "busy");
    if (held[0] != 2.0f) fail("busy value");
  }
  check_ok(w.remove_process_set(busy), "remove busy");
  ProcessSet again = add(w, first);
  if (again.id != 5) fail("ids are never reused: got " + std::to_string(again.id));
  // A set being removed refuses this rank's own calls on it.
  check_ok(w.remove_process_set(again), "remove again");
  std::vector<float> late(1, 1.0f);
  if (w.allreduce("late", view(late), {.process_set = again}).is_ok()) fail("a removed set runs nothing");
  std::printf("churn ok\n");
}

void refusals(Worker& w) {
  std::vector<int> pair{0, 1};
  ProcessSet set = add(w, pair);
  std::vector<float> v(2, 1.0f);
  if (w.rank() == 2) {
    hvrun::Status s = w.allreduce("outside", view(v), {.process_set = set});
    if (!contains(s.message(), "rank 2 is not in process set 1 (ranks 0, 1)")) fail("non-member: " + s.to_string());
  }
  if (w.rank() < 2) {
    hvrun::Status s = w.broadcast("root", view(v), 2, set);
    if (!contains(s.message(), "root rank 2 is not in process set 1")) fail("root outside: " + s.to_string());
  }
  // A mismatch on {1, 2} (the set's ranks 0 and 1) names the job's ranks 1 and 2, and the set.
  std::vector<int> upper{1, 2};
  ProcessSet upper_set = add(w, upper);
  if (w.rank() == 1 || w.rank() == 2) {
    std::vector<float> sized(static_cast<size_t>(w.rank() + 1), 1.0f);
    hvrun::Status m = w.allreduce("mismatch", view(sized), {.process_set = upper_set});
    if (!contains(m.message(), "rank 1 sent allreduce float32 [2]") ||
        !contains(m.message(), "rank 2 sent allreduce float32 [3]") ||
        !contains(m.message(), "process set 2 (ranks [1-2])"))
      fail("mismatch: " + m.to_string());
  }
  check_ok(w.remove_process_set(upper_set), "remove the upper set");
  hvrun::Status unknown = w.allreduce("unknown", view(v), {.process_set = ProcessSet{9}});
  if (!contains(unknown.message(), "there is no process set 9")) fail("unknown set: " + unknown.to_string());
  auto bad = w.add_process_set(std::vector<int>{0, w.size()});
  if (bad.is_ok() || !contains(bad.status().message(), "is not in the job")) fail("bad members");
  auto again = w.add_process_set(pair);
  if (again.is_ok() || !contains(again.status().message(), "already has exactly these ranks"))
    fail("duplicate set: " + again.status().to_string());
  hvrun::Status global = w.remove_process_set(ProcessSet{0});
  if (global.is_ok()) fail("the global set cannot be removed");
  // Removal while rank 0 has an op in flight on the set: refused on every rank.
  Handle pending;
  if (w.rank() == 0) pending = w.allreduce_async("pending", view(v), {.process_set = set});
  hvrun::Status early = w.remove_process_set(set);
  if (!contains(early.message(), "still in flight")) fail("removal in flight: " + early.to_string());
  if (w.rank() == 1) check_ok(w.allreduce("pending", view(v), {.process_set = set}), "pending peer");
  if (w.rank() == 0) check_ok(w.wait(pending), "pending");
  check_ok(w.remove_process_set(set), "removal after the wait");
  std::printf("refusals ok\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s disjoint|overlapping|churn|refusals\n", argv[0]);
    return 2;
  }
  auto worker = hvrun::test::init_or_report();
  if (!worker) return 2;
  const std::string mode = argv[1];
  if (mode == "disjoint") disjoint(*worker);
  else if (mode == "overlapping") overlapping(*worker);
  else if (mode == "churn") churn(*worker);
  else if (mode == "refusals") refusals(*worker);
  else { std::fprintf(stderr, "unknown mode %s\n", mode.c_str()); return 2; }
  check_ok(worker->shutdown(), "shutdown");
  return hvrun::test::failures() == 0 ? 0 : 1;
}
