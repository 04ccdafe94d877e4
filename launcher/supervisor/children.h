// What a job's supervisor (supervisor_loop.h, job_supervisor.h) runs: its children, whatever they
// are (this host's worker processes: local_workers.h; other hosts' agents through their links:
// remote/agent_links.h), and what they tell it back.
//
// Threads: everything here runs on the supervisor's loop thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "launcher/supervisor/job_summary.h"

namespace hvrun::launcher {

// After the last child exited, how long output still held open by what it left behind (or a
// remote shell's last frames) may take to drain.
inline constexpr std::chrono::milliseconds kOutputDrainLimit{1000};

// Where the ranks' output goes: hvrun's rank-tagged streams (rank_streams.h), or an agent's
// frames back to hvrun. `stream` is 1 (stdout) or 2 (stderr).
class RankOutput {
 public:
  virtual ~RankOutput() = default;
  // `record`'s process started: its output may come from now on.
  virtual void begin(WorkerRecord& record) = 0;
  virtual void write(int rank, int stream, std::string_view bytes) = 0;
  // The stream ended (or was cut at the drain limit).
  virtual void end(int rank, int stream) = 0;
};

// What children report to their supervisor.
class ChildrenEvents {
 public:
  virtual ~ChildrenEvents() = default;
  // A rank's exit was read into its record (every exit, success or not).
  virtual void exit_recorded(const WorkerRecord& record) = 0;
  // A rank exited with a failure on its own report (a frame), rather than found by reap().
  virtual void rank_failed(const WorkerRecord& record) = 0;
  // A rank could not be started: the job ends with `end`.
  virtual void start_failed(JobEnd end) = 0;
  // A child is gone without accounting for its ranks (an agent lost before its BYE): that
  // explains every other failure, so the job ends with `end` at once.
  virtual void child_lost(JobEnd end) = 0;
  // A rank's process began to die inside its job (a failure, `wait_status` as waitpid() will
  // report it a moment later): a job that goes on without lost ranks acts now.
  virtual void rank_dying(WorkerRecord& record, int wait_status) {
    (void)record;
    (void)wait_status;
  }
  // A line for the user ("hvrun: " is added).
  virtual void say(const std::string& text) = 0;
  // A child or an output stream ended: the supervisor checks whether the job is over.
  virtual void progress() = 0;
};

class Children {
 public:
  virtual ~Children() = default;

  // Reads every exit waiting to be read (after SIGCHLD, and before a verdict). Returns the first
  // failed rank's record among them (lowest rank: exits read together cannot be ordered), or
  // null; children whose ranks report their own exits return null.
  virtual WorkerRecord* reap() = 0;
  // Whether the verdict `end` should wait a moment for an exit or a loss that explains it better.
  virtual bool awaits_explanation(const JobEnd& end) const = 0;

  // The teardown: `sig` to every rank, then grace_over() after the grace period, or kill_now()
  // when hvrun is signalled again first.
  virtual void signal_all(int sig) = 0;
  virtual void grace_over() = 0;
  virtual void kill_now(int sig) = 0;

  // True while some child still runs.
  virtual bool running() const = 0;
  // Every child exited; deals with what they left running. False while that may still stop by
  // itself (`may_wait`: inside a teardown's grace period): the supervisor asks again shortly.
  virtual bool settle_leftovers(bool may_wait) = 0;
  // True while some child's output may still come.
  virtual bool output_open() const = 0;
  // Stops reading output and ends every stream (the drain limit passed, or everything ended).
  // May be called more than once.
  virtual void close_output() = 0;
};

}  // namespace hvrun::launcher
