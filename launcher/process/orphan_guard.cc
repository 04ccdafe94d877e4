#include "launcher/process/orphan_guard.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "launcher/process/own_children.h"

namespace hvrun::launcher {
namespace {

constexpr int32_t kRelease = 0;

bool read_exactly(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::read(fd, bytes, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Deletes, for each "<dir>/<prefix>*", the files of <dir> whose names start with <prefix>.
void sweep(const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    const size_t slash = pattern.rfind('/');
    if (slash == std::string::npos) continue;
    const std::string dir = pattern.substr(0, slash);
    const std::string prefix = pattern.substr(slash + 1, pattern.size() - slash - 2);
    if (prefix.empty()) continue;  // never "everything in the directory"
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
        ::unlinkat(::dirfd(d), e->d_name, 0);
    ::closedir(d);
  }
}

[[noreturn]] void guard_main(int read_fd) {
  // Ctrl-C at a terminal reaches hvrun's whole process group, guard included; the guard must
  // outlive hvrun's own handling of it, so it ignores the polite signals.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(sig, SIG_IGN);
  ::prctl(PR_SET_NAME, "hvrun-guard");
  int null_fd = ::open("/dev/null", O_RDWR);
  if (null_fd >= 0) {  // do not hold hvrun's terminal or output pipes open
    ::dup2(null_fd, 0);
    ::dup2(null_fd, 1);
    ::dup2(null_fd, 2);
    if (null_fd > 2) ::close(null_fd);
  }
  // Messages: an int32 > 0 is a process group to kill; kRelease ends quietly; an int32 < 0 is
  // followed by that many bytes of a path to delete.
  // A path ending in '*' is a sweep (sweep_on_exit): every file of that directory whose name
  // starts with what precedes the '*', deleted on any exit, released or not.
  std::vector<pid_t> groups;
  std::vector<std::string> paths;
  std::vector<std::string> sweeps;
  while (true) {
    int32_t msg = 0;
    if (!read_exactly(read_fd, &msg, sizeof msg)) break;  // hvrun is gone without releasing us
    if (msg == kRelease) {
      sweep(sweeps);
      ::_exit(0);
    }
    if (msg > 0) {
      groups.push_back(static_cast<pid_t>(msg));
      continue;
    }
    std::string path(static_cast<size_t>(-static_cast<int64_t>(msg)), '\0');
    if (!read_exactly(read_fd, path.data(), path.size())) break;
    (path.back() == '*' ? sweeps : paths).push_back(std::move(path));
  }
  for (pid_t g : groups) ::kill(-g, SIGKILL);
  for (const std::string& path : paths)  // in order: a directory after what it holds
    if (::unlink(path.c_str()) != 0 && errno == EISDIR) ::rmdir(path.c_str());
  sweep(sweeps);
  ::_exit(0);
}

}  // namespace

Result<OrphanGuard> OrphanGuard::start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return internal_error(std::string("cannot create the orphan guard's pipe: ") +
                          std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return internal_error(std::string("cannot fork the orphan guard: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::close(fds[1]);
    guard_main(fds[0]);
  }
  ::close(fds[0]);
  record_own_child(pid);
  return OrphanGuard(fds[1], pid);
}

OrphanGuard::~OrphanGuard() {
  if (fd_ >= 0) ::close(fd_);  // without release(): the guard kills what it watches
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
}

void OrphanGuard::watch(pid_t pgid) {
  if (fd_ < 0) return;
  int32_t msg = static_cast<int32_t>(pgid);
  ssize_t ignored = ::write(fd_, &msg, sizeof msg);
  (void)ignored;
}

void OrphanGuard::remove_on_exit(const std::string& path) {
  // One write of at most PIPE_BUF bytes is atomic: the guard never sees half a message.
  if (fd_ < 0 || path.empty() || path.size() + sizeof(int32_t) > PIPE_BUF) return;
  int32_t header = -static_cast<int32_t>(path.size());
  std::string msg(reinterpret_cast<const char*>(&header), sizeof header);
  msg += path;
  ssize_t ignored = ::write(fd_, msg.data(), msg.size());
  (void)ignored;
}

void OrphanGuard::sweep_on_exit(const std::string& dir, const std::string& prefix) {
  if (prefix.empty() || dir.empty()) return;
  remove_on_exit(dir + "/" + prefix + "*");
}

void OrphanGuard::release() {
  if (fd_ < 0) return;
  int32_t msg = kRelease;
  ssize_t ignored = ::write(fd_, &msg, sizeof msg);
  (void)ignored;
  ::close(fd_);
  fd_ = -1;
}

}  // namespace hvrun::launcher
