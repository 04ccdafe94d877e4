#include "launcher/health/health_options.h"

#include <cstdlib>

#include "common/setting_keys.h"
#include "launcher/plan/network_choice.h"

namespace hvrun::launcher {

namespace {

std::string join_commas(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : ",") + w;
  return out;
}

Result<int64_t> whole_number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0)
    return invalid_argument("hvrun health-check: " + flag + " takes a whole number >= 0, not '" +
                            text + "'");
  return static_cast<int64_t>(value);
}

}  // namespace

HealthOptions health_options(const Settings& settings, const std::string& cwd) {
  HealthOptions o;
  o.script = settings.get(setting::kHealthCheckScript);
  o.enabled = settings.get(setting::kHealthCheck) || !o.script.empty();
  o.timeout = std::chrono::milliseconds(
      static_cast<int64_t>(settings.get(setting::kHealthCheckTimeoutSeconds) * 1000.0));
  o.min_free_disk_mb = settings.get(setting::kHealthMinFreeDiskMb);
  std::string path = settings.get(setting::kHealthDiskPath);
  if (path.empty()) path = settings.get(setting::kOutputFilename);
  if (path.empty()) path = cwd;
  if (path.front() != '/') path = cwd + "/" + path;
  o.disk_path = path;
  o.interfaces = split_names(settings.get(setting::kNetworkInterface));
  o.pins_gpus = settings.get(setting::kDevice) != "cpu";
  return o;
}

std::vector<std::string> health_check_arguments(const HostCheckRequest& request) {
  const HealthOptions& o = request.options;
  std::vector<std::string> args = {"--timeout-ms",
                                   std::to_string(o.timeout.count()),
                                   "--min-free-disk-mb",
                                   std::to_string(o.min_free_disk_mb),
                                   "--disk-path",
                                   o.disk_path,
                                   "--gpus",
                                   std::to_string(o.pins_gpus ? request.slots : 0)};
  if (!o.interfaces.empty()) args.insert(args.end(), {"--interfaces", join_commas(o.interfaces)});
  if (!o.script.empty()) args.insert(args.end(), {"--script", o.script});
  return args;
}

Result<HostCheckRequest> parse_health_check_arguments(const std::vector<std::string>& args) {
  HostCheckRequest request;
  HealthOptions& o = request.options;
  o.enabled = true;
  o.disk_path = "/";
  o.min_free_disk_mb = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size())
      return invalid_argument("hvrun health-check: " + flag +
                              " needs a value (usage: hvrun "
                              "health-check [--timeout-ms MS] [--min-free-disk-mb MIB] "
                              "[--disk-path DIR] [--gpus N] [--interfaces A,B] [--script CMD])");
    const std::string& value = args[++i];
    if (flag == "--timeout-ms") {
      HVRUN_ASSIGN_OR_RETURN(const int64_t ms, whole_number(flag, value));
      o.timeout = std::chrono::milliseconds(ms);
    } else if (flag == "--min-free-disk-mb") {
      HVRUN_ASSIGN_OR_RETURN(o.min_free_disk_mb, whole_number(flag, value));
    } else if (flag == "--disk-path") {
      o.disk_path = value;
    } else if (flag == "--gpus") {
      HVRUN_ASSIGN_OR_RETURN(const int64_t gpus, whole_number(flag, value));
      request.slots = static_cast<int>(gpus);
      o.pins_gpus = gpus > 0;
    } else if (flag == "--interfaces") {
      o.interfaces = split_names(value);
    } else if (flag == "--script") {
      o.script = value;
    } else {
      return invalid_argument("hvrun health-check: unknown argument '" + flag + "'");
    }
  }
  return request;
}

}  // namespace hvrun::launcher
