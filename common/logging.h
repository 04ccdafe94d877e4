// Process-wide logging through spdlog. Lines go to stderr as
//   [12:00:01.234] [hvrun worker rank 1] [info] message
// with the rank added once it is known. The level comes from HVRUN_LOG_LEVEL (setting log_level),
// the time of day from HVRUN_LOG_TIMESTAMPS (setting log_timestamps).
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

#include "common/status.h"

namespace hvrun::logging {

// Installs the default logger for this process. `component` is "hvrun", "coordinator", "worker"...
// Safe to call more than once (the last call wins).
Status init(std::string_view component, std::string_view level, bool timestamps = true);

// Adds "rank N" to every later line of this process.
void set_rank(int rank);

Result<spdlog::level::level_enum> parse_level(std::string_view level);

}  // namespace hvrun::logging
