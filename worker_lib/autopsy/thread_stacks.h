// The native stacks of every thread of this process, for an autopsy: each thread is sent a
// signal (tgkill over /proc/self/task) whose handler records its backtrace into a slot
// allocated beforehand, and nothing else; the caller waits for the slots (bounded) and
// symbolises the addresses afterwards, outside any handler (symbolizer.h).
//
// Blocked system calls are restarted after the handler (SA_RESTART; sleeps and futex waits
// resume), so the trainer does not notice. A thread that blocks the signal, or does not run
// within the deadline, is reported without frames and with a note. The signal is SIGRTMIN+7,
// unless the program installed a handler of its own there (then no native stacks, said).
//
// Threads: any thread, one capture at a time in the process (others wait for it). The
// capturing thread records its own stack directly.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hvrun::detail {

struct NativeStack {
  pid_t tid = 0;
  std::vector<uintptr_t> pcs;  // innermost first; the first is where the thread was interrupted
  std::string note;            // why pcs is empty, when it is
};

// Every thread's stack; threads that did not answer by `deadline` have a note instead.
std::vector<NativeStack> capture_native_stacks(std::chrono::milliseconds deadline);

}  // namespace hvrun::detail
