// A data plane that carries cross-host rounds (host_rounds.h) without being hierarchical: a
// multi-host job on Gloo alone (one rank per host, or --hierarchical-allreduce off), where every
// rank speaks for itself to the round arbiter. The wrapped backend runs every collective; this
// owns the rounds (and, on rank 0, the arbiter) for as long as the plane lives, and an abort
// ends their waits too.
#pragma once

#include <memory>

#include "worker_lib/backend.h"
#include "worker_lib/backends/shm/host_rounds.h"
#include "worker_lib/backends/shm/round_arbiter.h"

namespace hvrun::detail {

std::unique_ptr<Backend> with_host_rounds(std::unique_ptr<Backend> plane,
                                          std::unique_ptr<shm::HostRounds> rounds,
                                          std::unique_ptr<shm::RoundArbiter> arbiter);

}  // namespace hvrun::detail
