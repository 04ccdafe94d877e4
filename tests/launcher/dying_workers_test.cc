// The death watch end to end in one host: a child process holds its slot as the worker library
// does (worker_lib/runtime/death_watch_holder.h) and the launcher's side (launcher/process/
// dying_workers.h) reports its death with the status it exits with, while the child is not
// reaped yet; a clean release reports nothing.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "launcher/process/dying_workers.h"
#include "worker_lib/runtime/death_watch_holder.h"

namespace hvrun::launcher {
namespace {

struct Reported {
  std::mutex mutex;
  std::condition_variable changed;
  std::optional<int> status;

  void set(int s) {
    std::lock_guard<std::mutex> lock(mutex);
    status = s;
    changed.notify_all();
  }
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, timeout, [&] { return status.has_value(); });
    return status;
  }
};

// A child that holds `assignment` ("<segment>:<slot>"), says so on `ready`, then does `then`.
template <typename Then>
pid_t holding_child(const std::string& assignment, Then then) {
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    auto held = detail::DeathWatchHolder::hold(assignment);
    if (!held.is_ok()) ::_exit(99);
    char one = '1';
    (void)!::write(ready[1], &one, 1);
    then(held);
    ::_exit(0);
  }
  ::close(ready[1]);
  char got = 0;
  EXPECT_EQ(::read(ready[0], &got, 1), 1) << "the child could not hold its slot";
  ::close(ready[0]);
  return pid;
}

std::string assignment_of(const DyingWorkers& watch, size_t slot) {
  const std::string entry = watch.environment_entry(slot);
  return entry.substr(entry.find('=') + 1);
}

TEST(DyingWorkers, AKilledWorkerIsReportedWithItsSignalBeforeItIsReaped) {
  auto watch = DyingWorkers::start(4);
  ASSERT_TRUE(watch.is_ok()) << watch.status().to_string();
  const pid_t pid = holding_child(assignment_of(**watch, 2), [](auto&) { ::pause(); });
  Reported reported;
  (*watch)->watch(2, pid, [&](int status) { reported.set(status); });
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  const std::optional<int> status = reported.wait(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL) << *status;
  int reaped = 0;
  ASSERT_EQ(::waitpid(pid, &reaped, 0), pid);  // only now: the report did not need it
  EXPECT_EQ(reaped, *status);
}

TEST(DyingWorkers, AWorkerExitingWithACodeWhileHoldingIsReportedWithIt) {
  auto watch = DyingWorkers::start(2);
  ASSERT_TRUE(watch.is_ok()) << watch.status().to_string();
  const pid_t pid = holding_child(assignment_of(**watch, 0), [](auto&) { ::_exit(3); });
  Reported reported;
  (*watch)->watch(0, pid, [&](int status) { reported.set(status); });
  const std::optional<int> status = reported.wait(std::chrono::seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 3) << *status;
  ::waitpid(pid, nullptr, 0);
}

TEST(DyingWorkers, ACleanReleaseAndExitIsNotReported) {
  auto watch = DyingWorkers::start(2);
  ASSERT_TRUE(watch.is_ok()) << watch.status().to_string();
  // Released (a shutdown), held again (an elastic reset's init), released, then exit 0.
  const std::string assignment = assignment_of(**watch, 1);
  const pid_t pid = holding_child(assignment, [&](auto& held) {
    held.value().reset();
    auto again = detail::DeathWatchHolder::hold(assignment);
    if (!again.is_ok()) ::_exit(98);
    ::usleep(100000);
    again.value().reset();
  });
  Reported reported;
  (*watch)->watch(1, pid, [&](int status) { reported.set(status); });
  int exited = 0;
  ASSERT_EQ(::waitpid(pid, &exited, 0), pid);
  EXPECT_TRUE(WIFEXITED(exited) && WEXITSTATUS(exited) == 0) << exited;
  EXPECT_FALSE(reported.wait(std::chrono::milliseconds(500)).has_value());
}

TEST(DyingWorkers, TheSegmentGoesWithTheWatch) {
  std::string name;
  {
    auto watch = DyingWorkers::start(1);
    ASSERT_TRUE(watch.is_ok()) << watch.status().to_string();
    name = (*watch)->segment_name();
    EXPECT_EQ(::access(("/dev/shm/" + name).c_str(), F_OK), 0);
  }
  EXPECT_NE(::access(("/dev/shm/" + name).c_str(), F_OK), 0);
}

}  // namespace
}  // namespace hvrun::launcher
