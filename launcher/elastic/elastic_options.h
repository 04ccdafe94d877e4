// Elastic jobs' settings as the launcher acts on them (docs/elastic.md): read once from the
// registry (--min-np, --max-np, --host-discovery-script, --slots-per-host, --elastic-timeout,
// --reset-limit, --blacklist-cooldown-range, --spares and their HVRUN_* / HOROVOD_* spellings).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "common/settings.h"
#include "common/status.h"

namespace hvrun::launcher {

struct CooldownRange {
  double min_seconds = 0;
  double max_seconds = 0;
};

struct ElasticOptions {
  bool enabled = false;  // any of --min-np, --max-np, --host-discovery-script, --spares given
  int start_np = 0;      // -np: the first membership's size
  int min_np = 0;        // --min-np, or -np when not given
  int max_np = 0;        // 0 = no limit
  std::string discovery_script;
  int slots_per_host = 0;
  std::chrono::milliseconds timeout{600000};
  int reset_limit = 0;  // 0 = no limit
  std::optional<CooldownRange> cooldown;  // none: a failed host is never used again
  int spares = 0;  // hot spares kept outside the membership (--spares)
  bool replace_stragglers = false;  // --replace-stragglers: a straggler's place goes to a spare
};

// `np`: the job's -np. Errors name the flag: a --min-np above -np or --max-np, a malformed
// cool-down range.
Result<ElasticOptions> elastic_options(const Settings& settings, int np);

// What an elastic job's workers are told (HVRUN_ELASTIC, HVRUN_ELASTIC_TIMEOUT, and
// HVRUN_ELASTIC_SPARE=1 for a hot spare), into `env`.
void put_elastic_environment(const ElasticOptions& options, bool spare,
                             std::map<std::string, std::string>& env);

// "10,100" or "10 100" (seconds, MIN <= MAX).
Result<CooldownRange> parse_cooldown_range(const std::string& text);

}  // namespace hvrun::launcher
