// hvrun_autopsy_worker: one rank of an autopsy test job (tests/autopsy/autopsy_test.cc). Every
// rank runs steps of three allreduces ('grad.fc1.<step>', 'grad.fc2.<step>', 'grad.out.<step>');
// before step 3, rank 1 gets stuck the way the mode says, and the others wait in that step's
// allreduces until hvrun's autopsy names rank 1 and the test ends the job:
//
//   pipe    rank 1 blocks in read() on a pipe nobody writes (block_in_read)
//   mutex   rank 1's training thread and a helper thread deadlock on two mutexes taken in
//           opposite orders (take_second_lock)
//   stop    rank 1 stops itself with SIGSTOP
//   busy    nobody gets stuck: kBusySteps steps of larger allreduces, every result checked,
//           while the test asks for autopsies (each signals every thread of every rank,
//           the data plane's included, mid-collective); exit 0 only when all were right
//
// The stuck rank bounds itself (alarm) so that nothing outlives a broken test. Built with -O0 -g:
// the autopsy names these functions and lines from the binary's debug information.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hvrun/hvrun.h"
#include "tests/support/worker_checks.h"

namespace {

constexpr int kStuckStep = 3;
constexpr unsigned kStuckSeconds = 60;  // the stuck rank's own bound (SIGALRM ends it)

// Kept out of line so that the autopsy sees each as a frame of its own.
[[gnu::noinline]] int block_in_read() {
  int fds[2];
  if (::pipe(fds) != 0) return 1;
  char byte = 0;
  std::fprintf(stderr, "rank 1: blocking in read() on a pipe\n");
  std::fflush(stderr);
  const ssize_t n = ::read(fds[0], &byte, 1);  // nobody writes: blocks here
  return n == 1 ? 0 : 1;
}

std::mutex first_lock;
std::mutex second_lock;
std::atomic<int> holding{0};

[[gnu::noinline]] void take_second_lock() {
  std::lock_guard<std::mutex> second(second_lock);  // the helper holds it: deadlock here
}

[[gnu::noinline]] void helper_takes_first_lock() {
  std::lock_guard<std::mutex> second(second_lock);
  ++holding;
  while (holding.load() < 2) std::this_thread::yield();
  std::lock_guard<std::mutex> first(first_lock);  // the trainer holds it
}

[[gnu::noinline]] void deadlock() {
  std::thread helper(helper_takes_first_lock);
  helper.detach();
  std::lock_guard<std::mutex> first(first_lock);
  ++holding;
  while (holding.load() < 2) std::this_thread::yield();
  std::fprintf(stderr, "rank 1: deadlocking on two mutexes\n");
  std::fflush(stderr);
  take_second_lock();
}

void get_stuck(const std::string& mode) {
  ::alarm(kStuckSeconds);
  if (mode == "pipe") {
    (void)block_in_read();
  } else if (mode == "mutex") {
    deadlock();
  } else if (mode == "stop") {
    std::fprintf(stderr, "rank 1: stopping itself\n");
    std::fflush(stderr);
    ::kill(::getpid(), SIGSTOP);
  }
}

constexpr int kBusySteps = 1500;

// Average of rank + 1 over the ranks, refilled every step; 1 when a result was wrong or failed.
int train_busy(hvrun::Worker& w) {
  const float want = static_cast<float>(w.size() + 1) / 2.0f;
  std::vector<float> a(64 << 10), b(4096), c(16);
  const hvrun::AllreduceOptions average{.op = hvrun::ReduceOp::kAverage};
  for (int step = 0; step < kBusySteps; ++step) {
    if (step == 1) {
      std::fprintf(stderr, "rank %d: busy\n", w.rank());
      std::fflush(stderr);
    }
    for (auto* v : {&a, &b, &c}) std::fill(v->begin(), v->end(), static_cast<float>(w.rank() + 1));
    const std::string s = std::to_string(step);
    auto view = [](std::vector<float>& v) {
      return hvrun::TensorView{v.data(), hvrun::DataType::kFloat32,
                               {static_cast<int64_t>(v.size())}};
    };
    std::vector<hvrun::Handle> handles;
    handles.push_back(w.allreduce_async("busy.a." + s, view(a), average));
    handles.push_back(w.allreduce_async("busy.b." + s, view(b), average));
    handles.push_back(w.allreduce_async("busy.c", view(c), average));
    for (hvrun::Handle& h : handles) {
      hvrun::Status status = w.wait(h);
      if (!status.is_ok()) {
        std::fprintf(stderr, "rank %d: step %d: %s\n", w.rank(), step, status.to_string().c_str());
        return 1;
      }
    }
    for (auto* v : {&a, &b, &c})
      for (float x : *v)
        if (x != want) {
          std::fprintf(stderr, "rank %d: step %d: %g instead of %g\n", w.rank(), step, x, want);
          return 1;
        }
  }
  std::fprintf(stderr, "rank %d: %d busy steps right\n", w.rank(), kBusySteps);
  return 0;
}

int train(hvrun::Worker& w, const std::string& mode) {
  std::vector<float> fc1(256, 1.0f), fc2(64, 1.0f), out(16, 1.0f);
  for (int step = 0; step < kStuckStep + 1; ++step) {
    if (w.rank() == 1 && step == kStuckStep) get_stuck(mode);
    const std::string s = std::to_string(step);
    std::vector<hvrun::Handle> handles;
    handles.push_back(w.allreduce_async("grad.fc1." + s, {fc1.data(), hvrun::DataType::kFloat32, {256}}));
    handles.push_back(w.allreduce_async("grad.fc2." + s, {fc2.data(), hvrun::DataType::kFloat32, {64}}));
    handles.push_back(w.allreduce_async("grad.out." + s, {out.data(), hvrun::DataType::kFloat32, {16}}));
    if (w.rank() != 1 && step == kStuckStep) {
      // Its batch reaches the coordinator meanwhile (a test then asks for an autopsy).
      (void)handles[0].wait(std::chrono::milliseconds(500));
      std::fprintf(stderr, "rank %d: waiting in step %d\n", w.rank(), step);
      std::fflush(stderr);
    }
    for (hvrun::Handle& h : handles) {
      hvrun::Status status = w.wait(h);
      if (!status.is_ok()) {
        std::fprintf(stderr, "rank %d: step %d: %s\n", w.rank(), step, status.to_string().c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "pipe" && mode != "mutex" && mode != "stop" && mode != "busy") {
    std::fprintf(stderr, "usage: hvrun_autopsy_worker pipe|mutex|stop|busy\n");
    return 2;
  }
  auto worker = hvrun::test::init_or_report();
  if (!worker) return 2;
  int rc = 0;
  if (mode == "busy") {
    rc = train_busy(*worker);
  } else if (mode == "mutex") {
    // The training loop on a thread of its own, as trainers with a data thread do.
    std::thread trainer([&] { rc = train(*worker, mode); });
    trainer.join();
  } else {
    rc = train(*worker, mode);
  }
  (void)worker->shutdown();
  return rc;
}
