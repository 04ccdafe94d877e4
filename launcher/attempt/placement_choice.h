// Which placement (placement.h) starts a job's ranks: the one place that decides it, once per
// job, so that a rank planned for a host always starts on that host. Ranks forked here
// (LocalProcesses) only when every rank of the job, now and later, is this machine's: a job
// whose discovery script may name hosts later runs through agents from the start, even when its
// first hosts are all this machine, since a forked rank can only run here and a unix-socket
// coordinator cannot be reached from other hosts. --mpi hands every rank to mpirun.
#pragma once

#include "launcher/elastic/elastic_options.h"
#include "launcher/plan/job_plan.h"

namespace hvrun::launcher {

enum class PlacementKind {
  kLocalProcesses,   // attempt/local_processes.h
  kMpirun,           // mpi/mpirun_processes.h
  kRemoteAgents,     // remote/remote_agents.h
};

// `mpi`: --mpi was given.
PlacementKind choose_placement(const JobPlan& plan, const ElasticOptions& elastic, bool mpi);

// `plan` as the agents' placement reads it: a single-host plan becomes one host's (its ranks'
// host, with as many slots as ranks).
JobPlan plan_for_agents(JobPlan plan);

}  // namespace hvrun::launcher
