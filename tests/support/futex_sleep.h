// Whether a thread sleeps in the futex system call, as the kernel says (/proc/<tid>/syscall).
// A test that must act only once a peer is asleep in a futex wait (to check that the action
// wakes it) waits for this instead of sleeping "long enough" for the peer to get there.
// Works for this process's threads and for its children (single-threaded: tid = pid).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

namespace hvrun::test {

// The calling thread's id, as asleep_in_futex() takes it.
pid_t this_thread_id();

// True while thread `tid` is blocked in futex(2).
bool asleep_in_futex(pid_t tid);

// Polls until every thread of `tids` is asleep in futex(2) at once, or `timeout` passes;
// returns whether they all were.
bool wait_until_asleep_in_futex(const std::vector<pid_t>& tids, std::chrono::milliseconds timeout);

}  // namespace hvrun::test
