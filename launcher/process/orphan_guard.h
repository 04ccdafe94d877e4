// Makes sure no worker outlives hvrun, even when hvrun is killed with SIGKILL.
//
// PR_SET_PDEATHSIG kills each worker's leader process when hvrun dies, but not what the worker
// started (a shell script's children). So hvrun forks, before any other thread exists, a tiny
// guard process that holds the read end of a pipe; hvrun tells it each worker's process group.
// When hvrun dies for any reason the pipe reaches end-of-file and the guard sends SIGKILL to
// every registered group, deletes the files it was given (the coordinator's socket), then exits.
// On a clean exit hvrun releases the guard, which then exits without doing anything.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace hvrun::launcher {

class OrphanGuard {
 public:
  // Forks the guard. Call first thing in main, while the process has a single thread.
  static Result<OrphanGuard> start();

  OrphanGuard(OrphanGuard&& other) noexcept : fd_(other.fd_), pid_(other.pid_) {
    other.fd_ = -1;
    other.pid_ = -1;
  }
  OrphanGuard& operator=(OrphanGuard&&) = delete;
  OrphanGuard(const OrphanGuard&) = delete;
  ~OrphanGuard();

  // The guard kills process group `pgid` if hvrun dies before release().
  void watch(pid_t pgid);
  // The guard deletes `path` (the coordinator's unix socket, then its directory, which must be
  // empty by then) if hvrun dies before release(). Paths are deleted in the order given.
  void remove_on_exit(const std::string& path);
  // The guard deletes every file in directory `dir` whose name starts with `prefix` when it
  // exits, released or not (the job's shared-memory segments: see launcher/process/shm_cleanup.h).
  void sweep_on_exit(const std::string& dir, const std::string& prefix);
  // hvrun has cleaned up itself: the guard exits without killing anything or deleting the
  // remove_on_exit() files; it still runs the sweep_on_exit() sweeps.
  void release();

  pid_t pid() const { return pid_; }

 private:
  OrphanGuard(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  int fd_ = -1;
  pid_t pid_ = -1;
};

}  // namespace hvrun::launcher
