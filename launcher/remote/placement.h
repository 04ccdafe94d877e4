// Who starts an attempt's ranks: this process (every rank on this machine, for the whole job)
// or each host's agent. The one place that decides it, so that a rank planned on a host always
// starts there: a job whose discovery script may name hosts later runs through agents from the
// start, even when its first hosts are all this machine, since the single-host runner can only
// fork here and its coordinator listens on a socket that other hosts cannot reach.
#pragma once

#include "launcher/elastic/elastic_options.h"
#include "launcher/plan/job_plan.h"

namespace hvrun::launcher {

// True when the ranks start through agents (multi_host_job.h); `mpi`: --mpi hands them to
// mpirun instead.
bool starts_through_agents(const JobPlan& plan, const ElasticOptions& elastic, bool mpi);

// `plan` as the agents' runner reads it: a single-host plan becomes one host's (its ranks'
// host, with as many slots as ranks).
JobPlan plan_for_agents(JobPlan plan);

}  // namespace hvrun::launcher
