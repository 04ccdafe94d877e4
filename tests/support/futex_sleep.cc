#include "tests/support/futex_sleep.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace hvrun::test {

pid_t this_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

bool asleep_in_futex(pid_t tid) {
  // The first field is the number of the system call the thread is blocked in ("running"
  // when it is not in one).
  std::ifstream in("/proc/" + std::to_string(tid) + "/syscall");
  long number = -1;
  return static_cast<bool>(in >> number) && number == SYS_futex;
}

bool wait_until_asleep_in_futex(const std::vector<pid_t>& tids, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool all = true;
    for (pid_t tid : tids) all = all && asleep_in_futex(tid);
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // polling a bounded condition
  }
}

}  // namespace hvrun::test
