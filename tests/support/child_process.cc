#include "tests/support/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/poll_until.h"
#include "tests/support/subprocess.h"

extern char** environ;

namespace hvrun::test {
namespace {

std::vector<std::string> environment_with(const EnvChanges& changes) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : changes) {
    if (v) env[k] = *v;
    else env.erase(k);
  }
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// `name` itself when it holds a '/', else the first executable of that name in `path_list`
// (looked up before fork: the child may only exec).
std::string executable_path(const std::string& name, const std::string& path_list) {
  if (name.find('/') != std::string::npos) return name;
  std::stringstream dirs(path_list);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const ChildOptions& options) {
  if (argv.empty()) return;
  std::vector<std::string> env_strings = environment_with(options.env);
  std::vector<std::string> args = argv;
  const char* path_list = std::getenv("PATH");
  const std::string program = executable_path(args[0], path_list != nullptr ? path_list : "");
  std::vector<char*> envp = pointers_to(env_strings), argp = pointers_to(args);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
  int log_fd = -1;
  if (!options.log_file.empty()) {
    log_fd = ::open(options.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0) return;
  } else if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    return;
  }
  if (options.stdin_text && ::pipe2(in, O_CLOEXEC) != 0) return;

  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);  // its own group, so that a kill reaches everything it started
    if (in[0] >= 0) ::dup2(in[0], 0);
    ::dup2(log_fd >= 0 ? log_fd : out[1], 1);
    ::dup2(log_fd >= 0 ? log_fd : err[1], 2);
    ::execve(program.c_str(), argp.data(), envp.data());
    dprintf(2, "exec %s: %s\n", program.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  if (pid_ > 0) ::setpgid(pid_, pid_);
  for (int fd : {out[1], err[1], in[0], log_fd})
    if (fd >= 0) ::close(fd);
  out_fd_ = out[0];
  err_fd_ = err[0];
  if (in[1] >= 0) {
    if (pid_ > 0 && !options.stdin_text->empty()) {
      ssize_t ignored = ::write(in[1], options.stdin_text->data(), options.stdin_text->size());
      (void)ignored;
    }
    ::close(in[1]);
  }
}

ChildProcess::~ChildProcess() {
  kill_now();
  for (pid_t p : extra_pids_) ::kill(p, SIGKILL);
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

bool ChildProcess::pump(std::chrono::milliseconds timeout) {
  if (!output_open()) return false;
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (::poll(fds, 2, static_cast<int>(timeout.count())) <= 0) return output_open();
  char buf[65536];
  for (int k = 0; k < 2; ++k) {
    if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
    if (n > 0) {
      (k == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(fds[k].fd);
      (k == 0 ? out_fd_ : err_fd_) = -1;
    }
  }
  return output_open();
}

bool ChildProcess::read_until(const std::function<bool(const std::string&)>& done,
                              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(out_)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (!output_open()) return done(out_);
    pump(std::chrono::milliseconds(20));
  }
  return true;
}

std::optional<std::string> ChildProcess::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (size_t nl = out_.find('\n', lines_read_); nl != std::string::npos) {
      std::string line = out_.substr(lines_read_, nl - lines_read_);
      lines_read_ = nl + 1;
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || out_fd_ < 0) return std::nullopt;
    pump(std::min(left, std::chrono::milliseconds(100)));
  }
}

bool ChildProcess::reap(bool block) {
  if (pid_ <= 0 || exited_) return exited_;
  int status = 0;
  if (::waitpid(pid_, &status, block ? 0 : WNOHANG) == pid_) {
    exited_ = true;
    exit_code_ = exit_code_of(status);
  }
  return exited_;
}

std::optional<int> ChildProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!reap(false)) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    if (output_open()) pump(std::chrono::milliseconds(10));
    else std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling for the exit
  }
  // What is left in the pipes (bounded: the writers are gone or about to be).
  const auto drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (output_open() && std::chrono::steady_clock::now() < drain_deadline)
    pump(std::chrono::milliseconds(20));
  return exit_code_;
}

bool ChildProcess::running() { return pid_ > 0 && !reap(false); }

void ChildProcess::kill_now() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);  // also what it left behind in its group after it exited
  if (!exited_) {
    ::kill(pid_, SIGKILL);
    reap(true);
  }
}

void ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return;
  ::kill(-pid_, SIGTERM);
  if (!wait_exit(grace)) kill_now();
}

namespace {

std::vector<std::string> hvrun_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv{bin_path("hvrun")};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ChildOptions with_env(const std::map<std::string, std::string>& env) {
  ChildOptions options;
  for (const auto& [k, v] : env) options.env[k] = v;
  return options;
}

}  // namespace

HvrunProcess::HvrunProcess(const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env)
    : ChildProcess(hvrun_command(args), with_env(env)) {}

bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = content.rfind(')');
  if (paren == std::string::npos || paren + 2 >= content.size()) return true;
  return content[paren + 2] == 'Z' || content[paren + 2] == 'X';
}

bool wait_all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  return poll_until(
      [&pids] {
        for (pid_t p : pids)
          if (!process_gone(p)) return false;
        return true;
      },
      timeout, std::chrono::milliseconds(10));
}

}  // namespace hvrun::test
