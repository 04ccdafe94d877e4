#include "launcher/health/health_command.h"

#include "launcher/health/health_checks.h"
#include "launcher/health/health_options.h"

namespace hvrun::launcher {

int run_health_check_command(const std::vector<std::string>& args, std::ostream& out,
                             std::ostream& err) {
  auto request = parse_health_check_arguments(args);
  if (!request.is_ok()) {
    err << request.status().message() << "\n";
    return 2;
  }
  const HealthVerdict verdict = check_this_host(*request);
  if (!verdict.healthy) {
    out << "unhealthy: " << verdict.reason << std::endl;
    return 1;
  }
  out << "healthy";
  for (const std::string& note : verdict.notes) out << "; " << note;
  out << std::endl;
  return 0;
}

}  // namespace hvrun::launcher
