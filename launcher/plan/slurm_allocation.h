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

// Variables that describe one Slurm task (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, ...): what
// hvrun (in a batch step) or an agent (in its one-task step) was started as, and false for the
// ranks hvrun starts. Left out of every worker's environment, so that tools which read them
// (PyTorch Lightning, submitit) see hvrun's RANK and WORLD_SIZE instead.
bool describes_slurm_task(const std::string& name);

// hvrun started as every task of a several-task srun step (`srun -N2 hvrun ...`) would start one
// job per task: refused, naming the step. A one-task step (or no step) is fine.
Status refuse_many_launchers_in_one_step(const GetEnv& getenv);

// The hosts a job of `num_proc` ranks (nullopt: one per task slot) runs on. With a task count
// (SLURM_NTASKS set), its slots are the limit. Without one (salloc -N2), Slurm's per-node count
// is the CPUs it gave each node: -np is needed, and spread evenly over the nodes (said in
// `notes`).
Result<std::vector<HostSlots>> slurm_job_hosts(const SlurmAllocation& allocation,
                                               std::optional<int> num_proc,
                                               std::vector<std::string>* notes);

}  // namespace hvrun::launcher
