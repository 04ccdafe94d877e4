#include "common/proc_state.h"

#include <dirent.h>
#include <sys/syscall.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hvrun {
namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string task_dir(pid_t pid, pid_t tid) {
  return "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/";
}

}  // namespace

std::optional<TaskState> read_task_state(pid_t pid, pid_t tid) {
  const std::string dir = task_dir(pid, tid);
  const std::string stat = read_small_file(dir + "stat");
  if (stat.empty()) return std::nullopt;
  TaskState task;
  task.tid = tid;
  // "tid (comm) S ...": the name may hold spaces and parentheses; the state follows the last ')'.
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    task.name = stat.substr(open + 1, close - open - 1);
    if (close + 2 < stat.size()) task.letter = stat[close + 2];
  }
  std::string wchan = read_small_file(dir + "wchan");
  if (wchan != "0") task.wchan = wchan;  // "0": running, or the kernel hides it
  // "/proc/.../syscall": "NR arg1 ... sp pc" while blocked in one, "running" or "-1 sp pc".
  const std::string call = read_small_file(dir + "syscall");
  if (!call.empty() && call.rfind("running", 0) != 0) {
    char* end = nullptr;
    const long number = std::strtol(call.c_str(), &end, 10);
    if (end != call.c_str() && number >= 0) task.syscall = syscall_name(number);
  }
  return task;
}

std::vector<pid_t> list_tasks(pid_t pid) {
  std::vector<pid_t> tasks;
  const std::string path = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return tasks;
  while (dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long tid = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && tid > 0) tasks.push_back(static_cast<pid_t>(tid));
  }
  ::closedir(dir);
  return tasks;
}

std::string state_word(char letter) {
  switch (letter) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "uninterruptible (disk)";
    case 'T': return "stopped";
    case 't': return "traced";
    case 'Z': return "zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    default: return "unknown";
  }
}

std::string syscall_name(long number) {
  struct Known {
    long number;
    const char* name;
  };
  static constexpr Known kKnown[] = {
#ifdef SYS_read
      {SYS_read, "read"},
#endif
#ifdef SYS_write
      {SYS_write, "write"},
#endif
#ifdef SYS_poll
      {SYS_poll, "poll"},
#endif
#ifdef SYS_ppoll
      {SYS_ppoll, "ppoll"},
#endif
#ifdef SYS_select
      {SYS_select, "select"},
#endif
#ifdef SYS_pselect6
      {SYS_pselect6, "pselect6"},
#endif
#ifdef SYS_futex
      {SYS_futex, "futex"},
#endif
#ifdef SYS_nanosleep
      {SYS_nanosleep, "nanosleep"},
#endif
#ifdef SYS_clock_nanosleep
      {SYS_clock_nanosleep, "clock_nanosleep"},
#endif
#ifdef SYS_epoll_wait
      {SYS_epoll_wait, "epoll_wait"},
#endif
#ifdef SYS_epoll_pwait
      {SYS_epoll_pwait, "epoll_pwait"},
#endif
#ifdef SYS_recvfrom
      {SYS_recvfrom, "recvfrom"},
#endif
#ifdef SYS_recvmsg
      {SYS_recvmsg, "recvmsg"},
#endif
#ifdef SYS_sendmsg
      {SYS_sendmsg, "sendmsg"},
#endif
#ifdef SYS_accept
      {SYS_accept, "accept"},
#endif
#ifdef SYS_accept4
      {SYS_accept4, "accept4"},
#endif
#ifdef SYS_connect
      {SYS_connect, "connect"},
#endif
#ifdef SYS_wait4
      {SYS_wait4, "wait4"},
#endif
#ifdef SYS_pread64
      {SYS_pread64, "pread64"},
#endif
#ifdef SYS_readv
      {SYS_readv, "readv"},
#endif
#ifdef SYS_pause
      {SYS_pause, "pause"},
#endif
#ifdef SYS_rt_sigtimedwait
      {SYS_rt_sigtimedwait, "rt_sigtimedwait"},
#endif
#ifdef SYS_ioctl
      {SYS_ioctl, "ioctl"},
#endif
  };
  for (const Known& known : kKnown)
    if (known.number == number) return known.name;
  return "syscall " + std::to_string(number);
}

}  // namespace hvrun
