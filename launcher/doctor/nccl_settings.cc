#include "launcher/doctor/nccl_settings.h"

#include <sstream>

namespace hvrun::doctor {

std::vector<std::pair<std::string, std::string>> parse_nccl_conf(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    out.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

std::vector<NcclConfigFile> nccl_config_files(const std::map<std::string, std::string>& env,
                                              const std::string& home) {
  std::vector<NcclConfigFile> files;
  auto conf = env.find("NCCL_CONF_FILE");
  const bool conf_set = conf != env.end() && !conf->second.empty();
  if (conf_set) files.push_back({conf->second, "NCCL_CONF_FILE", false, true, {}});
  if (!home.empty()) files.push_back({home + "/.nccl.conf", "~/.nccl.conf", false, !conf_set, {}});
  files.push_back({"/etc/nccl.conf", "/etc/nccl.conf", false, true, {}});
  return files;
}

std::map<std::string, EffectiveSetting> effective_nccl_settings(const MachineDescription& m) {
  std::map<std::string, EffectiveSetting> out;
  for (const auto& [name, value] : m.environment)
    if (name.rfind("NCCL_", 0) == 0) out[name] = {value, "environment", {}};
  for (const NcclConfigFile& file : m.config_files) {
    if (!file.exists || !file.read_by_nccl) continue;
    for (const auto& [name, value] : file.entries) {
      auto it = out.find(name);
      if (it == out.end()) out[name] = {value, file.path, {}};
      else it->second.overridden.push_back(file.path + ": " + name + "=" + value);
    }
  }
  return out;
}

std::optional<std::string> effective_value(const MachineDescription& m, const std::string& name) {
  auto all = effective_nccl_settings(m);
  if (auto it = all.find(name); it != all.end()) return it->second.value;
  return std::nullopt;
}

}  // namespace hvrun::doctor
