// How a job's end is told: by its first cause, never by a consequence of it.
//
// When one rank fails, others follow: the coordinator aborts, their collectives fail, they
// exit non-zero, and hvrun may see those exits before the failing rank's own (it is still
// unwinding, it is stopped, or waitpid reports them together). The coordinator records why it
// ended the job before any worker hears of it, so a worker whose exit followed that finds the
// record already there when hvrun looks: the rank it names is the cause, the exit a
// consequence. Without a record, the first rank hvrun saw fail is the cause.
//
// Used by the job supervisor (job_supervisor.h) for single-host and multi-host jobs alike.
// Pure: no I/O, no clock.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/supervisor/job_summary.h"

namespace hvrun::launcher {

// What the coordinator recorded as the reason it ended the job (CoordinatorServer::abort_cause()).
struct CoordinatorVerdict {
  std::string reason;
  int rank = -1;  // the rank it names, -1 for none
  std::string host;
  bool at_registration = false;  // the rendezvous failed, rather than a running job aborted
  bool departure = false;  // a rank left while others waited for it; the job was not aborted
};

// What a runner asks of the job's coordinator. Each member may be empty (no coordinator yet).
// Called on the runner's thread; the coordinator's own locks make them safe to call.
struct CoordinatorHooks {
  // Ends the job on the coordinator (reason, rank or -1, host).
  std::function<void(const std::string&, int, const std::string&)> abort;
  // Rank r's process ended (how: "exited with code 0"), e.g. before it ever registered.
  std::function<void(int, const std::string&)> worker_exited;
  // The coordinator's reason for ending the job, if it ended it.
  std::function<std::optional<CoordinatorVerdict>()> verdict;
  // Asks every rank for an autopsy (SIGUSR1 to hvrun; `trigger` says why); false when one is
  // under way or the job does not run.
  std::function<bool(const std::string&)> request_autopsy;

  std::optional<CoordinatorVerdict> read_verdict() const {
    return verdict ? verdict() : std::nullopt;
  }
};

// Whether the worker's wait status is a failure (anything but exit code 0).
bool is_failure(int wait_status);

// The end a worker's own failed exit gives the job: its code (128+signal for a signal).
JobEnd worker_failure(const WorkerRecord& worker);

// The end to report, given the first failure hvrun saw (`seen`: a worker's exit or a
// control-plane event) and the coordinator's verdict. With a verdict, the rank it names is the
// cause: that rank's own exit when it already failed by itself (its code; the message carries
// the coordinator's reason too), else the verdict. Without one, `seen`. `workers` is indexed
// by rank.
JobEnd first_cause(const JobEnd& seen, const std::optional<CoordinatorVerdict>& verdict,
                   const std::vector<WorkerRecord>& workers);

// True when `end` is the coordinator's verdict naming a rank that still runs: its exit (a
// moment away when the coordinator saw its connection drop) would be the better account.
bool awaits_named_rank(const JobEnd& end, const std::vector<WorkerRecord>& workers);

}  // namespace hvrun::launcher
