// Watches the workers this launcher (or agent) started for the moment their death begins
// (common/death_watch.h): one segment of slots, one watcher thread per started worker, blocked
// on the worker's mutex. A worker that dies between its init() and shutdown() is reported with
// the status it exits with (read from /proc while the kernel still tears it down), tens of
// milliseconds or more before waitpid() could say so; a clean shutdown or exit is not reported
// (waitpid() tells it as ever).
//
// Threads: start() and watch() from the owner's thread; `dying` is called on a watcher thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/death_watch.h"
#include "common/status.h"

namespace hvrun::launcher {

class DyingWorkers {
 public:
  // A segment of `slots` slots, named after this process.
  static Result<std::unique_ptr<DyingWorkers>> start(size_t slots);
  ~DyingWorkers();  // stops the watchers, unlinks the segment

  // The HVRUN_DEATH_WATCH entry ("HVRUN_DEATH_WATCH=<name>:<slot>") for the worker of `slot`.
  std::string environment_entry(size_t slot) const;
  const std::string& segment_name() const { return segment_.name(); }
  // Watches `slot`, whose worker is `pid`: `dying(wait_status)` once, if it dies inside a job.
  void watch(size_t slot, pid_t pid, std::function<void(int wait_status)> dying);

 private:
  explicit DyingWorkers(death_watch::Segment segment) : segment_(std::move(segment)) {}
  void run(size_t slot, pid_t pid, const std::function<void(int)>& dying);

  death_watch::Segment segment_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> watchers_;
};

}  // namespace hvrun::launcher
