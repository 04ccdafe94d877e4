// `hvrun --mpi`: the job runs under Open MPI's mpirun instead of hvrun's own workers and agents.
// hvrun still plans the job, runs the coordinator and supervises: its one child is mpirun,
// whose ranks take their ranks from OMPI_COMM_WORLD_* (worker_lib/config.cc) and reach the
// coordinator through the variables mpirun exports (-x NAME for every variable hvrun's workers
// would get from the launch host: the forwarded environment, the job's identity, non-default
// settings). mpirun starts the ranks (over its own ssh for other hosts) and tags their output.
//
// One host: the coordinator listens on a unix socket. Several hosts: hvrun has no agents there
// to probe the network, so --network-interface must name the interface(s) the hosts reach each
// other on; the coordinator listens on the launch host's address on the first of them, and
// GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME carry the names to the ranks (yours win).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/options/options.h"
#include "launcher/plan/job_plan.h"
#include "launcher/plan/rank_environment.h"

namespace hvrun::launcher {

struct MpiHandoff {
  std::string mpirun_path;
  // mpirun's argv, without the variables' values (those go in its environment).
  std::vector<std::string> argv;
  // Added to mpirun's environment (and exported): the network names of a multi-host job.
  Environment network;
  // "ADDR:PORT" the coordinator listens on for a multi-host job; empty: one host.
  std::string listen_on;
};

// The variables of the job's identity mpirun exports (their values are set in its environment).
inline constexpr const char* kMpiIdentityVariables[] = {"HVRUN_COORDINATOR_ADDR", "HVRUN_SECRET",
                                                        "HVRUN_JOB_ID"};

// `launch` is the environment every rank starts from (hvrun's, with the -x variables applied).
Result<MpiHandoff> plan_mpi_handoff(const LaunchOptions& options, const JobPlan& plan,
                                    const Environment& launch);

}  // namespace hvrun::launcher
