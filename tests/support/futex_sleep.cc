#include "tests/support/futex_sleep.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/support/poll_until.h"

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
  return poll_until(
      [&tids] {
        for (pid_t tid : tids)
          if (!asleep_in_futex(tid)) return false;
        return true;
      },
      timeout, std::chrono::microseconds(200));
}

}  // namespace hvrun::test
