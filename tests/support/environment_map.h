// An environment for Settings::apply_environment made of a map, so a test sets variables
// without setenv (the map must outlive the function).
#pragma once

#include <functional>
#include <map>
#include <string>

namespace hvrun::test {

inline std::function<const char*(const char*)> environment_of(
    const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace hvrun::test
