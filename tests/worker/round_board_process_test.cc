// The round board across processes: forked children over a MAP_SHARED mapping agree, disagree,
// fail and are woken by an abort in another process, as threads are.
#include "tests/worker/round_board_harness.h"
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hvrun::detail::shm {
namespace {

using namespace board_test;  // NOLINT(google-build-using-namespace): the tests' shared harness

// ---- across processes ---------------------------------------------------------------------------
// A board in a MAP_SHARED anonymous mapping, inherited by forked children, and a counter and a
// stamp after it.
class ProcessBoard {
 public:
  explicit ProcessBoard(int ranks)
      : bytes_((RoundBoard::bytes_needed(ranks) + 4095) / 4096 * 4096 + 4096),
        memory_(::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)),
        counter_(new (static_cast<std::byte*>(memory_) + bytes_ - 4096) std::atomic<int>{0}),
        stamp_(new (static_cast<std::byte*>(memory_) + bytes_ - 4096 + 64) Stamp{0}) {
    RoundBoard::initialise(memory_, ranks);
  }
  ~ProcessBoard() { ::munmap(memory_, bytes_); }
  ProcessBoard(const ProcessBoard&) = delete;
  ProcessBoard& operator=(const ProcessBoard&) = delete;
  void* memory() const { return memory_; }
  std::atomic<int>& counter() { return *counter_; }
  Stamp& stamp() { return *stamp_; }

 private:
  size_t bytes_;
  void* memory_;  // MAP_FAILED would crash at once, in the constructor
  std::atomic<int>* counter_;
  Stamp* stamp_;
};

// Forks one child per rank running body(rank), whose return value is its exit status; runs
// `meanwhile(their pids)` in the parent, then waits at most `limit` for all. Returns each
// child's exit status (-1: killed by a signal, or still running at the limit: then SIGKILLed by
// pid and reaped; -2: never started, fork failed).
std::vector<int> run_children(
    int ranks, seconds limit, const std::function<int(int)>& body,
    const std::function<void(const std::vector<pid_t>&)>& meanwhile = {}) {
  std::fflush(nullptr);  // buffered output would be written once per child too
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) std::_Exit(body(r));
    if (pid < 0) break;  // its status stays -2 (never started): the caller's check fails
    pids.push_back(pid);
  }
  if (meanwhile) meanwhile(pids);
  constexpr int kRunning = -2;
  std::vector<int> status(static_cast<size_t>(ranks), kRunning);
  const auto until = in(limit);
  for (size_t left = pids.size(); left > 0 && Clock::now() < until;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int st = 0;
      if (status[i] != kRunning || ::waitpid(pids[i], &st, WNOHANG) != pids[i]) continue;
      status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      --left;
    }
    if (left > 0) std::this_thread::sleep_for(milliseconds(1));  // polling a bounded wait
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (status[i] != kRunning) continue;
    ADD_FAILURE() << "child rank " << i << " (pid " << pids[i] << ") still running after "
                  << limit.count() << " s: killed";
    ::kill(pids[i], SIGKILL);
    ::waitpid(pids[i], &status[i], 0);
    status[i] = -1;
  }
  return status;
}

enum ChildExit { kChildOk = 0, kChildWrongOutcome = 10, kChildTooSlow = 11, kChildNullOpen = 12 };

// One rank of ProcessesAgreeDisagreeAndFailAlike: rounds agree, except that every 5th has one
// rank with another key (all must disagree) and every 11th one rank that refuses (all fail).
int agreeing_child(void* memory, int rank, int ranks) {
  static constexpr size_t kSizes[] = {8, RoundBoard::kInlineBytes, 4096, kSpillMax};
  RoundBoard b(memory, rank, ranks);
  for (int i = 0; i < 3000; ++i) {
    const auto gen = static_cast<uint32_t>(i);
    const size_t bytes = kSizes[i % 4];
    const bool refusal_round = i % 11 == 4;
    const bool odd_round = i % 5 == 2;
    if (refusal_round && (i / 11) % ranks == rank) {
      b.refuse(gen);
      continue;
    }
    const uint64_t variant = odd_round && (i / 5) % ranks == rank ? 9 : 0;
    std::string error;
    const auto start = Clock::now();
    const auto outcome =
        play(b, rank, ranks, gen, bytes, make_key(gen, bytes, variant), in(seconds(10)), &error);
    const std::string want = refusal_round ? "failed" : odd_round ? "disagreed" : "agreed";
    if (name_of(outcome) != want || !error.empty()) {
      std::fprintf(stderr, "child rank %d gen %u: %s, want %s %s\n", rank, gen,
                   name_of(outcome).c_str(), want.c_str(), error.c_str());
      return kChildWrongOutcome;
    }
    if (ms_since(start) > kPromptMs) return kChildTooSlow;
  }
  return kChildOk;
}

TEST_P(RanksTest, ProcessesAgreeDisagreeAndFailAlike) {
  const int ranks = GetParam();
  ProcessBoard shared(ranks);
  const auto status = run_children(
      ranks, seconds(60), [&](int rank) { return agreeing_child(shared.memory(), rank, ranks); });
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(status[static_cast<size_t>(r)], kChildOk) << "child rank " << r;
}

TEST_P(RanksTest, AbortInOneProcessWakesWaitersInOtherProcesses) {
  const int ranks = GetParam();
  const int parent_rank = ranks - 1;  // absent from the round: the children wait for it
  ProcessBoard shared(ranks);
  RoundBoard parent(shared.memory(), parent_rank, ranks);
  std::atomic<int>& waiting = shared.counter();
  Stamp& aborted_at = shared.stamp();
  const auto status = run_children(
      ranks - 1, seconds(30),
      [&](int rank) {
        RoundBoard b(shared.memory(), rank, ranks);
        std::byte* p = b.open(5, 64, in(seconds(30)));
        if (p == nullptr) return kChildNullOpen;
        fill_payload(p, 64, 5, rank);
        waiting.fetch_add(1);
        const RoundOutcome outcome = b.join(5, make_key(5, 64), in(seconds(30)));
        if (!happened(aborted_at)) return kChildWrongOutcome;  // returned before the abort
        if (ms_since(time_of(aborted_at)) > kPromptMs) return kChildTooSlow;
        if (outcome != RoundOutcome::kAborted) return kChildWrongOutcome;
        b.release();
        if (b.open(6, 64, in(seconds(30))) != nullptr) return kChildWrongOutcome;
        b.release();
        return kChildOk;
      },
      [&](const std::vector<pid_t>& children) {
        await(waiting, ranks - 1);
        await_asleep(children);  // single-threaded: each child's pid is its thread's id
        stamp_now(aborted_at);
        parent.abort();
      });
  for (int r = 0; r < ranks - 1; ++r)
    EXPECT_EQ(status[static_cast<size_t>(r)], kChildOk) << "child rank " << r;
  EXPECT_TRUE(parent.aborted());
}

}  // namespace
}  // namespace hvrun::detail::shm
