// What the kernel says a process or one of its threads is doing, read from /proc: its state
// letter (R running, S sleeping, D uninterruptible, T stopped, t traced, Z zombie), the kernel
// function it sleeps in (wchan) and the system call it is blocked in. Used by the worker
// library for its own threads (autopsy) and by the launcher for ranks that did not answer.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace hvrun {

struct TaskState {
  pid_t tid = 0;
  std::string name;     // comm
  char letter = '?';    // the state letter, '?' when unreadable
  std::string wchan;    // empty, or the kernel function ("pipe_read", "futex_wait_queue")
  std::string syscall;  // empty when not in one; a name ("read") or "syscall 123"
};

// One task (thread) of `pid`; `tid` == `pid` is the main thread. nullopt when it is gone.
std::optional<TaskState> read_task_state(pid_t pid, pid_t tid);
// Every task of `pid` (empty when the process is gone or unreadable).
std::vector<pid_t> list_tasks(pid_t pid);

// A process as /proc shows it now: its main thread (nullopt when the process is gone) and every
// task, the main thread among them.
struct ProcessSnapshot {
  std::optional<TaskState> main;
  std::vector<TaskState> tasks;
};
ProcessSnapshot read_process_snapshot(pid_t pid);

// The status `pid` exits with, as waitpid() will report it, read from /proc/<pid>/stat while
// the kernel still tears the process down (set as its exit begins: a process holding a large
// address space, PyTorch's for one, takes tens of milliseconds more before it can be reaped).
// 0 for a process that is not exiting or exits with code 0; nullopt when it is gone or the
// field is unreadable.
std::optional<int> read_exiting_status(pid_t pid);
// The snapshot as bytes to send to another host ('\0'-separated words), and back (nullopt when
// malformed).
std::string encode_process_snapshot(const ProcessSnapshot& snapshot);
std::optional<ProcessSnapshot> decode_process_snapshot(std::string_view bytes);

// "stopped", "sleeping", "running", "uninterruptible (disk)", "zombie", "traced", "idle".
std::string state_word(char letter);

// The x86-64 / aarch64 name of a system call number ("read"), or "syscall N".
std::string syscall_name(long number);

}  // namespace hvrun
