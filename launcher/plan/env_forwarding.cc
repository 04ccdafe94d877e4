#include "launcher/plan/env_forwarding.h"

namespace hvrun::launcher {

const std::vector<std::string>& ignored_for_remote_list() {
  static const std::vector<std::string> list = {
      "HOSTNAME",    "HOST",      "SSH_*", "DISPLAY", "XAUTHORITY", "TERM",
      "PWD",         "OLDPWD",    "SHLVL", "_",       "HOME",       "USER",
      "LOGNAME",     "SHELL",     "MAIL",  "TMPDIR",  "XDG_*",      "DBUS_SESSION_BUS_ADDRESS",
      "BASH_FUNC_*", "LS_COLORS", "PS1",   "TMUX*",   "STY",        "WINDOW"};
  return list;
}

bool ignored_for_remote(const std::string& name) {
  for (const std::string& pattern : ignored_for_remote_list()) {
    if (!pattern.empty() && pattern.back() == '*') {
      if (name.rfind(pattern.substr(0, pattern.size() - 1), 0) == 0) return true;
    } else if (name == pattern) {
      return true;
    }
  }
  return false;
}

Environment with_exports(Environment env, const Environment& launch,
                         const std::vector<ExportSpec>& exports, std::vector<std::string>* notes) {
  for (const ExportSpec& spec : exports) {
    if (spec.value) {
      env[spec.name] = *spec.value;
    } else if (auto it = launch.find(spec.name); it != launch.end()) {
      env[spec.name] = it->second;
    } else if (notes != nullptr) {
      notes->push_back("-x " + spec.name + ": not set on the launch host; nothing forwarded");
    }
  }
  return env;
}

Environment forwarded_environment(const Environment& launch, const std::vector<ExportSpec>& exports,
                                  std::vector<std::string>* notes) {
  Environment env;
  for (const auto& [key, value] : launch)
    if (!ignored_for_remote(key)) env[key] = value;
  return with_exports(std::move(env), launch, exports, notes);
}

}  // namespace hvrun::launcher
