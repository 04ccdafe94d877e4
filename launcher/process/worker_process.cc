#include "launcher/process/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "launcher/process/own_children.h"

namespace hvrun::launcher {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void close_pair(int fds[2]) {
  for (int i = 0; i < 2; ++i)
    if (fds[i] >= 0) ::close(fds[i]);
}

}  // namespace

Result<std::string> resolve_command(const std::string& command, const char* path_env) {
  if (command.empty()) return invalid_argument("the command is an empty string");
  if (command.find('/') != std::string::npos) {
    struct stat st {};
    if (::stat(command.c_str(), &st) != 0)
      return invalid_argument("command '" + command + "' does not exist");
    if (!S_ISREG(st.st_mode) || ::access(command.c_str(), X_OK) != 0)
      return invalid_argument("command '" + command + "' is not an executable file");
    return command;
  }
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + command;
    if (is_executable_file(candidate)) return candidate;
  }
  return invalid_argument("command '" + command + "' not found in PATH");
}

namespace {

// What the child of clone() needs; it shares hvrun's memory until it execs (CLONE_VM), so it
// only reads this and makes async-signal-safe system calls.
struct ChildArgs {
  const char* path;
  char* const* argv;
  char* const* envp;
  int stdin_fd, stdout_fd, stderr_fd, status_fd;
  pid_t parent;
  const cpu_set_t* cpus;  // null: inherit hvrun's
};

int child_main(void* raw) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(raw);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != a.parent) ::_exit(127);  // hvrun died before prctl took effect
  // hvrun's handlers must not run here (nor be inherited by exec as "ignored"): defaults, then
  // unblock what the parent blocked around clone().
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Best effort: the set comes from hvrun's own mask, so it only fails if that changed meanwhile.
  if (a.cpus != nullptr) (void)::sched_setaffinity(0, sizeof(cpu_set_t), a.cpus);
  if (a.stdin_fd >= 0) ::dup2(a.stdin_fd, 0);
  ::dup2(a.stdout_fd, 1);
  ::dup2(a.stderr_fd, 2);
  ::execve(a.path, a.argv, a.envp);
  int e = errno;
  ssize_t ignored = ::write(a.status_fd, &e, sizeof e);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

Result<SpawnedWorker> spawn_worker(const std::string& path, const std::vector<std::string>& argv,
                                   const std::vector<std::string>& envp, bool pipe_stdin,
                                   const std::vector<int>& cpus) {
  cpu_set_t cpu_set;
  CPU_ZERO(&cpu_set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpu_set);
  std::vector<char*> arg_ptrs, env_ptrs;
  for (const auto& a : argv) arg_ptrs.push_back(const_cast<char*>(a.c_str()));
  arg_ptrs.push_back(nullptr);
  for (const auto& e : envp) env_ptrs.push_back(const_cast<char*>(e.c_str()));
  env_ptrs.push_back(nullptr);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, exec_status[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(exec_status, O_CLOEXEC) != 0) {
    int e = errno;
    close_pair(out);
    close_pair(err);
    close_pair(exec_status);
    return internal_error(std::string("cannot create pipes for a worker: ") + std::strerror(e));
  }
  int in[2] = {-1, -1};
  if (pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) {
    int e = errno;
    close_pair(out);
    close_pair(err);
    close_pair(exec_status);
    return internal_error(std::string("cannot create a stdin pipe: ") + std::strerror(e));
  }
  int dev_null = pipe_stdin ? in[0] : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ChildArgs args{path.c_str(), arg_ptrs.data(), env_ptrs.data(), dev_null, out[1], err[1],
                 exec_status[1], ::getpid(), cpus.empty() ? nullptr : &cpu_set};

  // clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: no copy of hvrun's page tables (a
  // fork() of a process with gRPC loaded costs milliseconds), and hvrun resumes once the child
  // has exec'd. posix_spawn itself cannot set PR_SET_PDEATHSIG. Signals stay blocked meanwhile
  // so that no handler of hvrun's runs on the child's borrowed memory.
  constexpr size_t kStackSize = 64 * 1024;
  std::vector<char> stack(kStackSize);
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = ::clone(child_main, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD,
                      &args);
  int clone_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);

  ::close(out[1]);
  ::close(err[1]);
  ::close(exec_status[1]);
  if (dev_null >= 0) ::close(dev_null);
  if (pid < 0) {
    if (in[1] >= 0) ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    ::close(exec_status[0]);
    return internal_error(std::string("cannot start a worker process: ") +
                          std::strerror(clone_errno));
  }
  ::setpgid(pid, pid);  // also here, so the group exists before hvrun signals it
  record_own_child(pid);

  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_status[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(exec_status[0]);
  if (n > 0) {  // exec failed: the child has exited; reap it here
    ::waitpid(pid, nullptr, 0);
    if (in[1] >= 0) ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return invalid_argument("cannot run '" + path + "': " + std::strerror(exec_errno));
  }
  return SpawnedWorker{pid, out[0], err[0], in[1]};
}

bool reap_if_exited(pid_t pid, int* wait_status) {
  int status = 0;
  pid_t got;
  do {
    got = ::waitpid(pid, &status, WNOHANG);
  } while (got < 0 && errno == EINTR);
  if (got != pid) return false;
  *wait_status = status;
  return true;
}

}  // namespace hvrun::launcher
