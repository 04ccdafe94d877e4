#include "launcher/process/dying_workers.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <random>

#include "common/proc_state.h"

namespace hvrun::launcher {
namespace {

constexpr std::chrono::milliseconds kPoll{100};  // how often a watcher checks that it may go on

timespec realtime_after(std::chrono::milliseconds delay) {
  timespec at{};
  ::clock_gettime(CLOCK_REALTIME, &at);
  const long ns = at.tv_nsec + static_cast<long>(delay.count()) * 1000000L;
  at.tv_sec += ns / 1000000000L;
  at.tv_nsec = ns % 1000000000L;
  return at;
}

// The exit status of a process whose death began: its main thread's exit code may be set a
// moment after the thread that held the mutex died, so it is read until it says something
// (a failure), the process is reaped, or it stays 0 (a clean exit) for a few milliseconds.
int exiting_status(pid_t pid) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
  for (;;) {
    std::optional<int> status = read_exiting_status(pid);
    if (!status) return 0;  // reaped already: waitpid() has told it
    if (*status != 0 || std::chrono::steady_clock::now() > until) return *status;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

Result<std::unique_ptr<DyingWorkers>> DyingWorkers::start(size_t slots) {
  std::random_device random;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", random());
  const std::string name = "hvrun-deathwatch-" + std::to_string(::getpid()) + "-" + suffix;
  auto segment = death_watch::Segment::create(name, slots);
  if (!segment.is_ok()) return segment.status();
  return std::unique_ptr<DyingWorkers>(new DyingWorkers(std::move(segment).value()));
}

DyingWorkers::~DyingWorkers() {
  stopping_.store(true);
  for (size_t slot = 0; slot < segment_.slots(); ++slot) death_watch::wake_all(segment_.slot(slot).held);
  for (std::thread& watcher : watchers_)
    if (watcher.joinable()) watcher.join();
  ::shm_unlink(("/" + segment_.name()).c_str());
}

std::string DyingWorkers::environment_entry(size_t slot) const {
  return std::string(death_watch::kEnvironmentVariable) + "=" + segment_.name() + ":" +
         std::to_string(slot);
}

void DyingWorkers::watch(size_t slot, pid_t pid, std::function<void(int)> dying) {
  if (slot >= segment_.slots()) return;
  watchers_.emplace_back([this, slot, pid, dying = std::move(dying)] { run(slot, pid, dying); });
}

void DyingWorkers::run(size_t index, pid_t pid, const std::function<void(int)>& dying) {
  death_watch::Slot& slot = segment_.slot(index);
  uint32_t seen = 0;
  while (!stopping_.load()) {
    // Until the worker takes the mutex (its init()), or takes it again (an elastic reset).
    const uint32_t held = slot.held.load();
    if (held == seen) {
      if (!read_exiting_status(pid)) return;  // reaped: nothing is left to watch
      death_watch::wait_while_equal(slot.held, seen, kPoll);
      continue;
    }
    seen = held;
    for (;;) {
      const timespec until = realtime_after(kPoll);
      const int locked = pthread_mutex_timedlock(&slot.mutex, &until);
      if (locked == ETIMEDOUT) {
        if (stopping_.load()) return;
        continue;  // the worker holds it: alive inside its job
      }
      if (locked == EOWNERDEAD) {
        pthread_mutex_consistent(&slot.mutex);
        pthread_mutex_unlock(&slot.mutex);
        const int status = exiting_status(pid);
        // A process ending with status 0 without shutting down is no failure: waitpid() says it.
        if (status != 0 && !stopping_.load()) dying(status);
        return;
      }
      if (locked == 0) pthread_mutex_unlock(&slot.mutex);  // a clean shutdown
      break;
    }
  }
}

}  // namespace hvrun::launcher
