#include "worker_lib/runtime/private_coordinator.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "worker_lib/library_location.h"

namespace hvrun::detail {
namespace {

constexpr const char* kDaemon = "hvrun-coordinator";
// After Goodbye the daemon closes its server and exits: well under a second.
constexpr std::chrono::seconds kExitWait{5};
constexpr std::chrono::seconds kTermWait{2};

std::string self_directory() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string random_secret() {
  std::random_device device;  // /dev/urandom
  std::ostringstream out;
  out << std::hex;
  for (int i = 0; i < 4; ++i) out << static_cast<uint64_t>(device()) * 0x100000000ULL + device();
  return out.str();
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "ended";
}

// The daemon's first stdout line (its address), waiting at most until `deadline`.
Result<std::string> read_address_line(int fd, pid_t pid, const std::string& program,
                                      std::chrono::steady_clock::time_point deadline) {
  std::string line;
  char c = 0;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0)
      return deadline_exceeded(program + " (pid " + std::to_string(pid) +
                               ") did not print its address in time; its messages are above");
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      return unavailable(program + " " + describe_exit(status) +
                         " before it listened; its messages are above");
    }
    if (c == '\n') return line;
    line += c;
  }
}

// True once `pid` was reaped, polling its exit for at most `wait`.
bool reaped_within(pid_t pid, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done != 0) return true;  // reaped, or not our child any more
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::vector<std::string> private_coordinator_candidates(const std::string& search_path) {
  std::vector<std::string> out;
  if (const std::string lib = library_directory(); !lib.empty()) {
    out.push_back(lib + "/../bin/" + kDaemon);  // <prefix>/lib/libhvrun.so, <build>/lib
    out.push_back(lib + "/" + kDaemon);         // a program in <build>/bin linking it statically
  }
  if (const std::string self = self_directory(); !self.empty())
    out.push_back(self + "/" + kDaemon);  // a virtual environment's bin/ (the wheel's scripts)
  std::stringstream dirs(search_path);
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty()) out.push_back(dir + "/" + kDaemon);
  return out;
}

Result<std::unique_ptr<PrivateCoordinator>> PrivateCoordinator::start(
    const std::string& search_path, const std::string& inherited_secret,
    std::chrono::milliseconds timeout) {
  std::unique_ptr<PrivateCoordinator> c(new PrivateCoordinator());
  const std::vector<std::string> candidates = private_coordinator_candidates(search_path);
  for (const std::string& path : candidates) {
    if (::access(path.c_str(), X_OK) == 0) {
      c->program_ = std::filesystem::weakly_canonical(path).string();
      break;
    }
  }
  if (c->program_.empty()) {
    std::string looked;
    for (const std::string& path : candidates) looked += (looked.empty() ? "" : ", ") + path;
    return not_found(std::string("no launcher environment (HVRUN_COORDINATOR_ADDR is not set), "
                                 "and a single process needs ") + kDaemon +
                     " for its job of size 1, which is not in " + looked +
                     ": install hvrun completely, or start the trainer with hvrun");
  }

  char dir_template[] = "/tmp/hvrun-solo-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr)
    return unavailable(std::string("cannot make a directory for the private coordinator's "
                                   "socket under /tmp: ") + std::strerror(errno));
  c->directory_ = dir_template;
  // The daemon takes HVRUN_SECRET from the environment it inherits when it is set there, and
  // otherwise the first line of its stdin: the secret never appears in argv.
  const bool secret_on_stdin = inherited_secret.empty();
  c->secret_ = secret_on_stdin ? random_secret() : inherited_secret;

  // Everything the child needs is made before fork: between fork and exec only async-signal-
  // safe calls (the trainer may have many threads).
  const std::string listen = "unix:" + c->directory_ + "/coordinator.sock";
  const std::string job_id = "hvrun-solo-" + std::to_string(::getpid());
  std::vector<std::string> args{c->program_, "--world-size", "1", "--listen", listen,
                                "--job-id", job_id, "--exit-with-stdin"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // out: the daemon's stdout (its address line); in: its stdin, whose write end only this
  // process holds, so the daemon sees end of file once this process is gone, however it ends.
  int out[2], in[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return unavailable(std::string("pipe for the private coordinator: ") + std::strerror(errno));
  if (::pipe2(in, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return unavailable(std::string("pipe for the private coordinator: ") + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], in[0], in[1]}) ::close(fd);
    return unavailable(std::string("cannot start ") + kDaemon + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(in[0]);
  c->pid_ = pid;
  c->stdout_fd_ = out[0];
  c->stdin_fd_ = in[1];
  if (secret_on_stdin) {
    const std::string line = c->secret_ + "\n";  // far below a pipe's buffer: never blocks
    if (::write(c->stdin_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
      return unavailable(std::string("cannot hand the secret to ") + kDaemon + ": " +
                         std::strerror(errno));
  }
  auto address = read_address_line(out[0], pid, c->program_,
                                   std::chrono::steady_clock::now() + timeout);
  if (!address.is_ok()) {
    if (address.status().code() == StatusCode::kUnavailable) c->pid_ = -1;  // already reaped
    return address.status();
  }
  c->address_ = *address;
  return c;
}

void PrivateCoordinator::wait_for_exit() { end(kExitWait); }

void PrivateCoordinator::end(std::chrono::milliseconds grace) {
  if (pid_ > 0) {
    if (!reaped_within(pid_, grace)) {
      ::kill(pid_, SIGTERM);
      if (!reaped_within(pid_, kTermWait)) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
      }
    }
    pid_ = -1;
  }
  for (int* fd : {&stdout_fd_, &stdin_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  if (!directory_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(directory_, ec);
    directory_.clear();
  }
}

PrivateCoordinator::~PrivateCoordinator() { end(std::chrono::milliseconds(0)); }

}  // namespace hvrun::detail
