#include "tests/launcher/hvrun_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "tests/support/subprocess.h"

extern char** environ;

namespace hvrun::test {

HvrunProcess::HvrunProcess(const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings, argv{bin_path("hvrun")};
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> envp, argp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : argv) argp.push_back(s.data());
  argp.push_back(nullptr);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    setpgid(0, 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(argp[0], argp.data(), envp.data());
    _exit(127);
  }
  setpgid(pid_, pid_);
  close(out[1]);
  close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

HvrunProcess::~HvrunProcess() {
  if (!exited_) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  for (pid_t p : extra_pids_) kill(p, SIGKILL);
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void HvrunProcess::pump(int timeout_ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) <= 0) return;
  char buf[65536];
  for (int k = 0; k < 2; ++k) {
    if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = read(fds[k].fd, buf, sizeof buf);
    if (n > 0) {
      (k == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
    } else {
      close(fds[k].fd);
      (k == 0 ? out_fd_ : err_fd_) = -1;
    }
  }
}

bool HvrunProcess::read_until(const std::function<bool(const std::string&)>& done,
                              std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done(out_)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (out_fd_ < 0 && err_fd_ < 0) return done(out_);
    pump(20);
  }
  return true;
}

std::optional<int> HvrunProcess::wait_exit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    if (out_fd_ >= 0 || err_fd_ >= 0) pump(10);
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));  // poll for the exit
  }
  // What is left in the pipes (bounded: writers are gone or about to be).
  auto drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while ((out_fd_ >= 0 || err_fd_ >= 0) && std::chrono::steady_clock::now() < drain_deadline)
    pump(20);
  return exit_code_;
}

bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = content.rfind(')');
  if (paren == std::string::npos || paren + 2 >= content.size()) return true;
  return content[paren + 2] == 'Z' || content[paren + 2] == 'X';
}

bool wait_all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    bool all = true;
    for (pid_t p : pids) all = all && process_gone(p);
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a bounded condition
  }
}

}  // namespace hvrun::test
