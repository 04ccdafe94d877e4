// The data-plane tuning a job's environment gives (the CPU backend, the fast path) and the GPUs
// this process sees: what hvrun_init_with_config takes from the environment, since the C struct
// carries only how to reach the job. Read by config.cc, the library's one reader of the
// environment.
#pragma once

#include <string>

#include "hvrun/hvrun.h"

namespace hvrun::detail {

Status apply_tuning_from_environment(Config& config);

// PATH, where a single process looks for hvrun-coordinator last (runtime/private_coordinator.h).
std::string executable_search_path();

}  // namespace hvrun::detail
