// Where an attempt's ranks start, and how (docs/design/launch.md). The attempt (attempt.h) sets
// the job up once; a placement only starts each rank's process and supervises it:
//   LocalProcesses  (attempt/local_processes.h)  every rank forked on this host;
//   MpirunProcesses (mpi/mpirun_processes.h)     one mpirun on this host starts them;
//   RemoteAgents    (remote/remote_agents.h)     each host's `hvrun agent` starts its ranks,
//                                                and an elastic job's new hosts get one too.
// placement_choice.h decides which, once per job.
#pragma once

#include <functional>

#include "hvrun.pb.h"
#include "launcher/plan/rank_environment.h"

namespace hvrun::launcher {

class Attempt;

class Placement {
 public:
  virtual ~Placement() = default;

  // Every rank runs on this host: an autopsy reads their /proc here.
  virtual bool ranks_are_local() const = 0;
  // How the NCCL decision asks whether two of the job's GPUs reach each other (empty: it
  // cannot be asked from here, P2P is left to NCCL).
  virtual PeerAccessProbe peer_access_probe() const { return {}; }

  // Starts the ranks and supervises them until the job is over; returns hvrun's exit code. Makes
  // its runner from attempt.runner_config(), hands it to attempt.supervise() before anything can
  // fail, and starts the attempt's coordinator once it knows where the ranks reach it. The runner
  // lives as long as the placement (the attempt reads how the job ended from it).
  virtual int run(Attempt& attempt) = 0;

  // On the supervisor's loop: an autopsy's report completed with what only this placement can
  // read (another host's /proc), then handed to `report`.
  using AutopsyReport = std::function<void(const v1::AutopsyJobReport&)>;
  virtual void complete_autopsy(const v1::AutopsyJobReport& collected, AutopsyReport report) {
    report(collected);
  }
};

}  // namespace hvrun::launcher
