// hvrun's command line: `hvrun [options] COMMAND [ARGS...]`.
//
// Job-shape options (-np, -H, --hostfile) are the launcher's own; every tunable is a setting of
// the registry (common/settings.h) and is accepted as its flag. Every flag of horovodrun is
// accepted too (horovod_flags.h), and --config-file reads Horovod's YAML file of parameters
// (horovod_config_file.h): flags win over it, it wins over the environment. Parsing stops at the
// first argument that is not an option: that is the command, and what follows belongs to it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/settings.h"
#include "common/status.h"

namespace hvrun::launcher {

struct HostSlots {
  std::string host;
  int slots = 0;
};

// -x NAME[=VALUE]: a variable for every rank on every host (multi-host jobs forward it past the
// ignore list). An HVRUN_* setting given this way is validated and applied as hvrun's own.
struct ExportSpec {
  std::string name;
  std::optional<std::string> value;  // nullopt: take the launch host's value
};

// "NAME" or "NAME=VALUE" (NAME: letters, digits, '_', not starting with a digit).
Result<ExportSpec> parse_export(const std::string& text);

struct LaunchOptions {
  std::optional<int> num_proc;       // -np / --num-proc
  std::vector<HostSlots> hosts;      // -H / --hosts, or --hostfile
  std::string hostfile;
  std::vector<std::string> command;  // COMMAND [ARGS...]
  std::vector<ExportSpec> exports;   // -x, in order
  std::string config_file;           // --config-file: Horovod's YAML parameters
  Settings settings;                 // defaults < environment < --config-file < flags
  // One line each for what was accepted but changes nothing here (horovodrun's switches for
  // what hvrun does anyway, config keys Horovod does not read), for hvrun to print at start.
  std::vector<std::string> notes;
  bool print_config = false;
  bool check_build = false;
  bool show_version = false;
  bool show_help = false;
};

// Parses argv (argv[0] excluded). Environment settings are applied before flags, so flags win.
// Errors are one line (no trailing newline) meant to follow "hvrun: ".
Result<LaunchOptions> parse_command_line(const std::vector<std::string>& args,
                                         const std::function<const char*(const char*)>& getenv);

// "host:slots[,host:slots...]"
Result<std::vector<HostSlots>> parse_hosts(const std::string& text);

// Lines "host slots=N", "host:N" or "host" (1 slot), '#' comments; anything else, or the slots
// given twice, is an error naming the file and line.
Result<std::vector<HostSlots>> read_hostfile(const std::string& path);

std::string usage_text();

}  // namespace hvrun::launcher
