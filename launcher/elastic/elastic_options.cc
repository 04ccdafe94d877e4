#include "launcher/elastic/elastic_options.h"

#include <cmath>
#include <sstream>

#include "common/setting_keys.h"

namespace hvrun::launcher {

Result<CooldownRange> parse_cooldown_range(const std::string& text) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream in(spaced);
  CooldownRange range;
  std::string rest;
  if (!(in >> range.min_seconds >> range.max_seconds) || (in >> rest) ||
      !(range.min_seconds >= 0) || !(range.max_seconds >= range.min_seconds))
    return invalid_argument("--blacklist-cooldown-range '" + text +
                            "': give MIN,MAX in seconds with 0 <= MIN <= MAX (e.g. 10,100)");
  return range;
}

void put_elastic_environment(const ElasticOptions& options, bool spare,
                             std::map<std::string, std::string>& env) {
  env["HVRUN_ELASTIC"] = "1";
  if (spare) env["HVRUN_ELASTIC_SPARE"] = "1";
  env["HVRUN_ELASTIC_TIMEOUT"] =
      std::to_string(static_cast<double>(options.timeout.count()) / 1000.0);
}

Result<ElasticOptions> elastic_options(const Settings& settings, int np) {
  ElasticOptions o;
  const int64_t min_np = settings.get(setting::kMinNp);
  const int64_t max_np = settings.get(setting::kMaxNp);
  o.discovery_script = settings.get(setting::kHostDiscoveryScript);
  o.spares = static_cast<int>(settings.get(setting::kSpares));
  o.enabled = min_np > 0 || max_np > 0 || !o.discovery_script.empty() || o.spares > 0;
  o.start_np = np;
  o.min_np = min_np > 0 ? static_cast<int>(min_np) : np;
  o.max_np = static_cast<int>(max_np);
  o.slots_per_host = static_cast<int>(settings.get(setting::kSlotsPerHost));
  o.timeout = std::chrono::milliseconds(
      std::llround(settings.get(setting::kElasticTimeoutSeconds) * 1000.0));
  o.reset_limit = static_cast<int>(settings.get(setting::kResetLimit));
  if (const std::string range = settings.get(setting::kBlacklistCooldownRange); !range.empty()) {
    HVRUN_ASSIGN_OR_RETURN(CooldownRange parsed, parse_cooldown_range(range));
    o.cooldown = parsed;
  }
  o.replace_stragglers = settings.get(setting::kReplaceStragglers);
  if (o.replace_stragglers && o.spares == 0)
    return invalid_argument(
        "--replace-stragglers needs --spares N: a straggler is replaced by a hot spare, and "
        "this job has none");
  if (!o.enabled) return o;
  if (o.min_np > np)
    return invalid_argument("--min-np " + std::to_string(o.min_np) + " is more than -np " +
                            std::to_string(np) + " (the job starts with -np ranks)");
  if (o.max_np > 0 && o.max_np < np)
    return invalid_argument("--max-np " + std::to_string(o.max_np) + " is less than -np " +
                            std::to_string(np));
  return o;
}

}  // namespace hvrun::launcher
