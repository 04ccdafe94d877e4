// `hvrun health-check ARGS`: the health check of the host it runs on (health_checks.h), as hvrun
// runs it there (host_health.h; ARGS from health_check_arguments()). Prints one line, "healthy"
// (with notes after "; ") or "unhealthy: REASON", and exits 0 or 1; 2 for malformed arguments.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace hvrun::launcher {

int run_health_check_command(const std::vector<std::string>& args, std::ostream& out,
                             std::ostream& err);

}  // namespace hvrun::launcher
