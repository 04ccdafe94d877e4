// --bind-to: which CPUs each worker runs on. `none` (the default, as horovodrun and torchrun):
// the kernel places workers. `block`: every local rank gets its own equal share of the physical
// cores hvrun itself may use (its affinity mask), whole cores with all their hardware threads,
// in core order, as `mpirun --map-by slot:PE=N --bind-to core` would; the first (cores % ranks)
// ranks get one more. Ranks that spin while waiting for each other (the shared-memory data
// plane) then never share a core, and a rank's threads stay on its CPUs. With fewer cores than
// ranks, CPUs (hardware threads) are shared out instead. Applied to the worker between fork and
// exec, so everything it starts inherits it.
#pragma once

#include <string>
#include <vector>

namespace hvrun::launcher {

// The CPUs this process may run on, ascending (sched_getaffinity).
std::vector<int> allowed_cpus();

// The allowed CPUs grouped by physical core (hardware threads of one core together, from
// /sys/devices/system/cpu/cpuN/topology), cores ordered by their first CPU.
std::vector<std::vector<int>> cores_of(const std::vector<int>& allowed);

// Local rank `local_rank` of `local_size`'s share: whole cores when there are at least as many
// cores as ranks, else single CPUs; empty when there are fewer CPUs than ranks (nothing
// sensible to bind to). The result is sorted.
std::vector<int> cpu_block(const std::vector<std::vector<int>>& cores, int local_rank,
                           int local_size);

// The CPUs to bind a worker to, from its environment ("KEY=VALUE": HVRUN_BIND_TO,
// HVRUN_LOCAL_RANK, HVRUN_LOCAL_SIZE) and this process's CPUs; empty = do not bind. Logs a
// warning when block binding is asked for but the host has fewer CPUs than ranks.
std::vector<int> binding_for_worker(const std::vector<std::string>& envp);

// "0-3,8" for logs.
std::string cpu_list_text(const std::vector<int>& cpus);

}  // namespace hvrun::launcher
