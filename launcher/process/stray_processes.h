// What a job's workers left running outside their process groups: found, ended and named.
//
// A worker's process group (process_group.h) holds what it starts, unless something leaves it:
// a daemon that forks twice and calls setsid() is an orphan in a group and session of its own,
// which the kernel would hand to init, and which would outlive the job (holding a GPU, a port,
// a file). So the process that starts workers (hvrun for a single-host job, each host's agent)
// makes itself a child subreaper (PR_SET_CHILD_SUBREAPER): such orphans become its children
// instead. Every child it did not start itself (own_children.h), with everything below that
// child, is a stray of the job; the reaper ends them with the job (SIGTERM, then SIGKILL after
// the grace period) and says which they were.
//
// What it cannot reach: a process that left the tree while hvrun was not its subreaper (hvrun
// killed with SIGKILL first: the orphan guard kills the process groups only), or one handed to
// another service (systemd-run, a container runtime).
//
// Threads: one owner (the supervisor's loop thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace hvrun::launcher {

struct StrayProcess {
  pid_t pid = 0;
  std::string command;  // its command line, shortened (proc_table.h)
  std::string rank;     // HVRUN_RANK in its environment: whose worker started it ("" unknown)
};

// The strays below this process now (alive ones only).
std::vector<StrayProcess> find_strays();

class StrayReaper {
 public:
  // Makes this process a child subreaper. `grace`: how long a stray has between SIGTERM and
  // SIGKILL once the job is over.
  explicit StrayReaper(std::chrono::milliseconds grace);

  // Sends `sig` to every stray there is now, followed by SIGCONT (a stopped process acts on a
  // signal only when it runs again) unless `sig` is SIGKILL.
  void signal(int sig);
  // Reaps the strays that exited: they are this process's children (call on SIGCHLD).
  void reap_exited();
  // The workers have all exited: ends the strays, SIGTERM first, SIGKILL once the grace period
  // since their SIGTERM passed (at once with `kill_at_once`). True when every stray is gone or
  // has been sent SIGKILL; false while one may still end on SIGTERM (ask again shortly).
  bool settle(bool kill_at_once);
  // Every stray found, named ("pid 4242 (sleep 600) from rank 1, sent SIGTERM"), "; " between
  // them; "" when there was none.
  std::string report() const;
  // Whether report() has something new since the last call to this.
  bool take_unreported();

 private:
  using Clock = std::chrono::steady_clock;
  struct Stray {
    StrayProcess process;
    Clock::time_point terminated{};  // when SIGTERM (or the job's stop signal) went; {} before
    bool killed = false;             // SIGKILL went
    int last_signal = 0;             // what was sent to it last
  };
  Stray& remember(const StrayProcess& process);

  std::chrono::milliseconds grace_;
  std::vector<Stray> found_;  // every stray seen, in the order found
  size_t reported_ = 0;       // found_[0..reported_) were in a take_unreported() report
};

}  // namespace hvrun::launcher
