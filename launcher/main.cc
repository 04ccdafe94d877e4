// hvrun: the launcher command.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "launcher/options.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = hvrun::launcher::parse_command_line(
      args, [](const char* name) { return std::getenv(name); });
  if (!parsed.is_ok()) {
    std::cerr << "hvrun: " << parsed.status().message() << "\n";
    return 2;
  }
  const hvrun::launcher::LaunchOptions& opts = *parsed;
  if (opts.show_help) {
    std::cout << hvrun::launcher::usage_text();
    return 0;
  }
  if (opts.show_version) {
    std::cout << "hvrun " << hvrun::build_info().version << "\n";
    return 0;
  }
  if (opts.check_build) {
    std::cout << hvrun::describe_build();
    return 0;
  }
  if (opts.print_config) {
    opts.settings.print(std::cout);
    return 0;
  }
  if (opts.command.empty()) {
    std::cerr << "hvrun: no command given (usage: hvrun [options] COMMAND [ARGS...])\n";
    return 2;
  }
  std::cerr << "hvrun: running jobs is not built yet\n";
  return 2;
}
