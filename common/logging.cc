#include "common/logging.h"

#include <mutex>
#include <string>

#include <spdlog/sinks/stdout_sinks.h>

namespace hvrun::logging {
namespace {

std::mutex g_mutex;
std::string g_component = "hvrun";
bool g_timestamps = true;

void apply_pattern(const std::string& tag) {
  spdlog::set_pattern(std::string(g_timestamps ? "[%H:%M:%S.%e] " : "") + "[" + tag + "] [%l] %v");
}

}  // namespace

Result<spdlog::level::level_enum> parse_level(std::string_view level) {
  if (level == "trace") return spdlog::level::trace;
  if (level == "debug") return spdlog::level::debug;
  if (level == "info") return spdlog::level::info;
  if (level == "warn" || level == "warning") return spdlog::level::warn;
  if (level == "error" || level == "fatal") return spdlog::level::err;
  if (level == "off") return spdlog::level::off;
  return invalid_argument("invalid log level '" + std::string(level) +
                          "' (HVRUN_LOG_LEVEL): expected trace, debug, info, warn, error or off");
}

Status init(std::string_view component, std::string_view level, bool timestamps) {
  auto parsed = parse_level(level);
  if (!parsed.is_ok()) return parsed.status();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_component = std::string(component);
  g_timestamps = timestamps;
  auto logger = std::make_shared<spdlog::logger>(
      "hvrun", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  spdlog::set_default_logger(logger);
  spdlog::set_level(*parsed);
  apply_pattern(g_component == "hvrun" ? "hvrun" : "hvrun " + g_component);
  return Status::ok();
}

void set_rank(int rank) {
  std::lock_guard<std::mutex> lock(g_mutex);
  apply_pattern("hvrun " + g_component + " rank " + std::to_string(rank));
}

}  // namespace hvrun::logging
