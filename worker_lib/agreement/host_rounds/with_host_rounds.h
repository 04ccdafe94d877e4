// A data plane that carries cross-host rounds (host_rounds.h): the hierarchical plane (a board
// per host, local rank 0 speaking for it) or a multi-host job on Gloo alone (one rank per host,
// or --hierarchical-allreduce off), where every rank speaks for itself to the round arbiter. The
// wrapped backend runs every collective; this owns the rounds (and, on rank 0, the arbiter) for
// as long as the plane lives, ends them before the plane (whose shm segment may hold the board
// they use), and an abort ends their waits too.
#pragma once

#include <memory>

#include "worker_lib/agreement/host_rounds/host_rounds.h"
#include "worker_lib/agreement/host_rounds/round_arbiter.h"
#include "worker_lib/backend.h"

namespace hvrun::detail {

std::unique_ptr<Backend> with_host_rounds(std::unique_ptr<Backend> plane,
                                          std::unique_ptr<agreement::HostRounds> rounds,
                                          std::unique_ptr<agreement::RoundArbiter> arbiter);

}  // namespace hvrun::detail
