// NCCL's settings as NCCL itself will see them: the environment first, then NCCL_CONF_FILE (or
// ~/.nccl.conf when NCCL_CONF_FILE is unset), then /etc/nccl.conf. NCCL loads each file with
// setenv(..., overwrite=0) (src/misc/param.cc, initEnv), so the first place that names a
// variable wins.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/doctor/machine.h"

namespace hvrun::doctor {

struct EffectiveSetting {
  std::string value;
  std::string source;  // "environment" or the file's path
  std::vector<std::string> overridden;  // "/etc/nccl.conf: NCCL_X=old" lines that lost
};

// NAME=VALUE lines as NCCL reads them: '#' starts a comment line, lines without '=' are
// skipped, nothing is trimmed.
std::vector<std::pair<std::string, std::string>> parse_nccl_conf(const std::string& text);

// The files NCCL would read, in its order, for this environment and home directory.
std::vector<NcclConfigFile> nccl_config_files(const std::map<std::string, std::string>& env,
                                              const std::string& home);

std::map<std::string, EffectiveSetting> effective_nccl_settings(const MachineDescription& m);

std::optional<std::string> effective_value(const MachineDescription& m, const std::string& name);

}  // namespace hvrun::doctor
