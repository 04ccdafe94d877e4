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

std::optional<int> read_exiting_status(pid_t pid) {
  const std::string stat = read_small_file(task_dir(pid, pid) + "stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  // Fields after the name, from the 3rd (the state); the exit code is the 52nd.
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int n = 3; n <= 52; ++n) {
    if (!(fields >> field)) return std::nullopt;
  }
  char* end = nullptr;
  const long status = std::strtol(field.c_str(), &end, 10);
  if (end == field.c_str()) return std::nullopt;
  return static_cast<int>(status);
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

ProcessSnapshot read_process_snapshot(pid_t pid) {
  ProcessSnapshot snapshot;
  if (pid <= 0) return snapshot;
  snapshot.main = read_task_state(pid, pid);
  if (!snapshot.main) return snapshot;
  for (pid_t tid : list_tasks(pid))
    if (std::optional<TaskState> task = read_task_state(pid, tid)) snapshot.tasks.push_back(*task);
  return snapshot;
}

namespace {
constexpr size_t kTaskWords = 5;  // tid, name, letter, wchan, syscall

void put_task(std::string& out, const TaskState& t) {
  for (const std::string& word :
       {std::to_string(t.tid), t.name, std::string(1, t.letter), t.wchan, t.syscall}) {
    out += word;
    out += '\0';
  }
}

std::optional<TaskState> take_task(const std::vector<std::string_view>& words, size_t at) {
  TaskState t;
  const std::string tid(words[at]);
  char* end = nullptr;
  t.tid = static_cast<pid_t>(std::strtol(tid.c_str(), &end, 10));
  if (tid.empty() || *end != '\0' || words[at + 2].size() != 1) return std::nullopt;
  t.name = words[at + 1];
  t.letter = words[at + 2][0];
  t.wchan = words[at + 3];
  t.syscall = words[at + 4];
  return t;
}
}  // namespace

// Words: "1" (the process exists) then its main task and every task, kTaskWords each; or "0".
std::string encode_process_snapshot(const ProcessSnapshot& snapshot) {
  std::string out = snapshot.main ? std::string("1", 1) + '\0' : std::string("0", 1) + '\0';
  if (!snapshot.main) return out;
  put_task(out, *snapshot.main);
  for (const TaskState& t : snapshot.tasks) put_task(out, t);
  return out;
}

std::optional<ProcessSnapshot> decode_process_snapshot(std::string_view bytes) {
  std::vector<std::string_view> words;
  for (size_t start = 0; start < bytes.size();) {
    const size_t nul = bytes.find('\0', start);
    if (nul == std::string_view::npos) return std::nullopt;  // every word ends with one
    words.push_back(bytes.substr(start, nul - start));
    start = nul + 1;
  }
  ProcessSnapshot snapshot;
  if (words.size() == 1 && words[0] == "0") return snapshot;
  if (words.empty() || words[0] != "1" || (words.size() - 1) % kTaskWords != 0 ||
      words.size() < 1 + kTaskWords)
    return std::nullopt;
  for (size_t at = 1; at < words.size(); at += kTaskWords) {
    std::optional<TaskState> t = take_task(words, at);
    if (!t) return std::nullopt;
    if (at == 1)
      snapshot.main = *t;
    else
      snapshot.tasks.push_back(*t);
  }
  return snapshot;
}

}  // namespace hvrun
