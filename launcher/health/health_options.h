// What a host's health check looks at (docs/elastic.md, "Health"), read once from the settings,
// and the same as `hvrun health-check` arguments: the check runs on the host itself, where
// hvrun's settings are not, so they travel on its command line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/settings.h"
#include "common/status.h"

namespace hvrun::launcher {

struct HealthOptions {
  bool enabled = false;                      // --health-check, or a script given
  std::string script;                        // --health-check-script
  std::chrono::milliseconds timeout{30000};  // --health-check-timeout
  int64_t min_free_disk_mb = 1024;           // --health-min-free-disk; 0: not checked
  std::string disk_path;                     // --health-disk-path, resolved (never empty)
  std::vector<std::string> interfaces;       // --network-interface: the data interface
  bool pins_gpus = true;                     // not --device cpu
};

// `cwd`: hvrun's working directory (the disk path's default, and a relative one's base).
HealthOptions health_options(const Settings& settings, const std::string& cwd);

// What a host where `slots` ranks will run is asked to check.
struct HostCheckRequest {
  HealthOptions options;
  int slots = 0;
};

// `hvrun health-check` arguments (after the subcommand) for `request`.
std::vector<std::string> health_check_arguments(const HostCheckRequest& request);
// Their parse; an error names the argument.
Result<HostCheckRequest> parse_health_check_arguments(const std::vector<std::string>& args);

}  // namespace hvrun::launcher
