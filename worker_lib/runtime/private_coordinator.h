// A coordinator of this process's own, for a trainer started without a launcher (`python
// train.py`, `./train`): init() then runs a job of size 1 where every collective works, as
// Horovod does.
//
// It is the hvrun-coordinator daemon (--world-size 1), started as a child this process owns:
// the worker library reaches a coordinator only through the wire protocol, as for any job, and
// never links the coordinator's service. The child listens on a unix socket in a fresh 0700
// directory, inherits this process's environment, takes the secret as the first line of its
// stdin (never argv; HVRUN_SECRET when the environment has one) and runs in its own process
// group (a Ctrl-C meant for the trainer does not reach it). Its stdin is a pipe only this
// process writes to (--exit-with-stdin): when the trainer ends without shutdown(), however it
// ends (even SIGKILL, even before it registered), the daemon sees end of file and ends the job
// itself. After a clean shutdown() it ends on Goodbye and is reaped here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun::detail {

class PrivateCoordinator {
 public:
  // Looks for hvrun-coordinator beside the library (../bin/ of libhvrun.so's folder, or the
  // folder itself), beside this program (a virtual environment's bin/ holds both python and
  // the wheel's scripts), then in `search_path` (PATH). `inherited_secret`: HVRUN_SECRET of
  // this process's environment, which the daemon then reads too; empty: a fresh one. Waits up
  // to `timeout` for its address.
  static Result<std::unique_ptr<PrivateCoordinator>> start(const std::string& search_path,
                                                           const std::string& inherited_secret,
                                                           std::chrono::milliseconds timeout);
  ~PrivateCoordinator();  // stops a daemon still running (SIGTERM, then SIGKILL) and reaps it
  PrivateCoordinator(const PrivateCoordinator&) = delete;
  PrivateCoordinator& operator=(const PrivateCoordinator&) = delete;

  const std::string& address() const { return address_; }
  const std::string& secret() const { return secret_; }
  const std::string& program() const { return program_; }
  pid_t pid() const { return pid_; }

  // Reaps the daemon: it ends by itself once the job is over (Goodbye, or its rank gone); past
  // a few seconds it is killed. Removes the socket's directory. Idempotent.
  void wait_for_exit();

 private:
  PrivateCoordinator() = default;
  // Reaps the daemon once it ends, giving it `grace` to do so by itself before SIGTERM (then
  // SIGKILL), and removes the socket's directory.
  void end(std::chrono::milliseconds grace);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;  // the daemon's stdout (its address line), open while it runs
  int stdin_fd_ = -1;   // the write end of its stdin: closed when this process ends
  std::string program_, directory_, address_, secret_;
};

// The candidates start() tries, in order (exposed for its test).
std::vector<std::string> private_coordinator_candidates(const std::string& search_path);

}  // namespace hvrun::detail
