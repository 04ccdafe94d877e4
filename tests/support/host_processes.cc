#include "tests/support/host_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hvrun::test {

std::string readlink_text(const std::string& path) {
  std::error_code ec;
  auto target = std::filesystem::read_symlink(path, ec);
  return ec ? std::string() : target.string();
}

std::vector<std::string> cmdline_of(pid_t pid) {
  std::string raw = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> words;
  std::string w;
  for (char c : raw) {
    if (c == '\0') {
      words.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  return words;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> pids;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return pids;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long v = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0') pids.push_back(static_cast<pid_t>(v));
  }
  ::closedir(d);
  return pids;
}

bool is_zombie(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
}

// Live processes running `exe` (any namespace).
std::vector<pid_t> processes_running(const std::string& exe) {
  std::vector<pid_t> out;
  for (pid_t pid : all_pids())
    if (readlink_text("/proc/" + std::to_string(pid) + "/exe") == exe && !is_zombie(pid))
      out.push_back(pid);
  return out;
}

// The network namespace identity of a named namespace and of a process.
std::string netns_of_name(const std::string& ns) {
  struct stat st {};
  if (::stat(("/run/netns/" + ns).c_str(), &st) != 0) return "?";
  return "net:[" + std::to_string(st.st_ino) + "]";
}
std::string netns_of_pid(pid_t pid) {
  return readlink_text("/proc/" + std::to_string(pid) + "/ns/net");
}

std::optional<int> LoggedProcess::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) {
      pid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    ::usleep(20000);  // polling a child that cannot notify us otherwise
  }
  return std::nullopt;
}

LoggedProcess::~LoggedProcess() {
  if (pid > 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}


std::unique_ptr<LoggedProcess> start_logged(const std::vector<std::string>& argv,
                                            const std::string& dir, const std::string& name) {
  auto s = std::make_unique<LoggedProcess>();
  s->out_path = dir + "/" + name + ".out";
  s->err_path = dir + "/" + name + ".err";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int out = ::open(s->out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(s->err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  s->pid = pid;
  return s;
}

std::string ip_command() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "ip";
}

pid_t parent_of(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 > stat.size()) return -1;
  std::istringstream rest(stat.substr(paren + 2));
  char state = 0;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

pid_t hvrun_agent_in(const std::string& ns) {
  const std::string want = netns_of_name(ns);
  auto is_agent = [](pid_t pid) {
    auto words = cmdline_of(pid);
    return words.size() >= 2 && words[1] == "agent" && words[0].find("hvrun") != std::string::npos;
  };
  for (pid_t pid : all_pids()) {
    if (is_agent(pid) && netns_of_pid(pid) == want && !is_zombie(pid) && !is_agent(parent_of(pid)))
      return pid;
  }
  return -1;
}

}  // namespace hvrun::test
