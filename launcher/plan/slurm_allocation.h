// The hosts and task slots of the Slurm allocation hvrun runs in (salloc, sbatch), from what
// Slurm puts in the environment: SLURM_JOB_ID, SLURM_JOB_NODELIST in Slurm's compressed form
// (node[01-03,7],gpu5), SLURM_TASKS_PER_NODE (2(x3),1) and SLURM_NTASKS when a task count was
// asked for. A job given no -H or --hostfile takes its hosts from here (cli/main.cc).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "launcher/options/options.h"

namespace hvrun::launcher {

struct SlurmAllocation {
  std::string job_id;
  std::vector<HostSlots> hosts;  // in Slurm's order, slots from SLURM_TASKS_PER_NODE
  std::string tasks_per_node;    // as Slurm wrote it, for messages
  bool tasks_requested = false;  // SLURM_NTASKS is set: the allocation's task count is a limit
};

// "node[01-03,7],gpu5" -> node01 node02 node03 node7 gpu5 (zero padding kept).
Result<std::vector<std::string>> expand_slurm_hostlist(const std::string& compressed);
// "2(x3),1" -> 2 2 2 1.
Result<std::vector<int>> expand_slurm_tasks_per_node(const std::string& text);

using GetEnv = std::function<const char*(const char*)>;

// The allocation this process runs in; nullopt outside one. An error when Slurm's variables
// cannot be read (names the variable and its value).
Result<std::optional<SlurmAllocation>> slurm_allocation(const GetEnv& getenv);

// hvrun started as every task of a several-task srun step (`srun -N2 hvrun ...`) would start one
// job per task: refused, naming the step. A one-task step (or no step) is fine.
Status refuse_many_launchers_in_one_step(const GetEnv& getenv);

// The hosts a job of `num_proc` ranks (nullopt: one per task slot) runs on. An allocation made
// without a task count (salloc -N2) has one task per node by Slurm's count: a larger -np is
// spread evenly over its nodes, said in `notes`. With a task count, -np may not exceed it.
Result<std::vector<HostSlots>> slurm_job_hosts(const SlurmAllocation& allocation,
                                               std::optional<int> num_proc,
                                               std::vector<std::string>* notes);

}  // namespace hvrun::launcher
