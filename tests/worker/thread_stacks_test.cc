// Native stacks of every thread (worker_lib/autopsy/thread_stacks.h, symbolizer.h): a thread
// blocked in read() on a pipe is captured with its function, and keeps reading afterwards (the
// capture signal restarts the call); a thread that blocks the signal is reported with a note.
#include "worker_lib/autopsy/symbolizer.h"
#include "worker_lib/autopsy/thread_stacks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/proc_state.h"

namespace hvrun::detail {
namespace {

std::atomic<pid_t> reader_tid{0};
std::atomic<int> read_result{-2};

[[gnu::noinline]] void thread_stacks_test_reads_a_pipe(int fd) {
  reader_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  char byte = 0;
  read_result = static_cast<int>(::read(fd, &byte, 1));
}

bool blocked_in_read(pid_t tid) {
  auto state = read_task_state(::getpid(), tid);
  return state && state->letter == 'S' && state->syscall == "read";
}

TEST(ThreadStacks, CapturesAThreadBlockedInReadAndItKeepsReading) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread reader(thread_stacks_test_reads_a_pipe, fds[0]);
  for (int i = 0; i < 500 && !(reader_tid && blocked_in_read(reader_tid)); ++i) usleep(10000);
  ASSERT_TRUE(blocked_in_read(reader_tid));

  const auto stacks = capture_native_stacks(std::chrono::milliseconds(2000));
  Symbolizer symbolizer;
  bool found = false;
  for (const NativeStack& stack : stacks) {
    if (stack.tid != reader_tid) continue;
    found = true;
    ASSERT_TRUE(stack.note.empty()) << stack.note;
    bool named = false, in_libc = false;
    for (const v1::AutopsyFrame& frame : symbolizer.frames(stack.pcs)) {
      named = named || frame.function().find("thread_stacks_test_reads_a_pipe") != std::string::npos;
      // Every frame in a loaded object carries its offset there, named or not (addr2line's
      // input for the static functions a stripped libc cannot name).
      if (frame.object().find("libc.so") != std::string::npos) {
        in_libc = true;
        EXPECT_GT(frame.object_offset(), 0u) << frame.DebugString();
        EXPECT_LT(frame.object_offset(), frame.address()) << frame.DebugString();
      }
    }
    EXPECT_TRUE(named);
    EXPECT_TRUE(in_libc) << "no frame in libc for a thread blocked in read()";
  }
  EXPECT_TRUE(found);
  // The read resumed after the handler: it still blocks, then takes the byte written now.
  EXPECT_EQ(read_result.load(), -2);
  ASSERT_EQ(::write(fds[1], "x", 1), 1);
  reader.join();
  EXPECT_EQ(read_result.load(), 1);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(ThreadStacks, AThreadBlockingTheSignalGetsANoteInsteadOfFrames) {
  std::atomic<pid_t> tid{0};
  std::atomic<bool> release{false};
  std::thread blocker([&] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    tid = static_cast<pid_t>(::syscall(SYS_gettid));
    while (!release) usleep(1000);
  });
  while (!tid) usleep(1000);
  const auto stacks = capture_native_stacks(std::chrono::milliseconds(200));
  release = true;
  blocker.join();
  bool found = false;
  for (const NativeStack& stack : stacks) {
    if (stack.tid != tid) continue;
    found = true;
    EXPECT_TRUE(stack.pcs.empty());
    EXPECT_NE(stack.note.find("did not run the capture signal"), std::string::npos) << stack.note;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace hvrun::detail
