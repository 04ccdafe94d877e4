// horovodrun --config-file FILE: Horovod's YAML file of run-time parameters, read as the
// horovodrun flags it stands for (Horovod 0.28.1, runner/common/util/config_parser.py):
//
//   controller: gloo
//   params:
//     fusion_threshold_mb: 32
//     hierarchical_allreduce: true
//   stall_check:
//     warning_time_seconds: 120
//
// Horovod's file is a mapping of sections to scalars, and that is what this reader takes (its
// own small parser, no YAML library): top-level `key: scalar` and `section:` lines, `key:
// scalar` lines indented under a section, '#' comments, plain, 'single'- and "double"-quoted
// scalars. Anything else YAML allows (lists, flow collections, anchors, block scalars, deeper
// nesting) is an error naming the line. Keys Horovod does not read are reported, not applied.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace hvrun::launcher {

// One key of the file as the horovodrun flag it means.
struct ConfigFlag {
  std::string flag;                  // "--fusion-threshold-mb", "--no-hierarchical-allreduce"
  std::optional<std::string> value;  // for a flag that takes one
  // The flags of the same Horovod option (a switch's two spellings): a key is not applied when
  // one of them was given on the command line, which wins, as in horovodrun.
  std::vector<std::string> same_option;
  std::string origin;                // "FILE:LINE"
};

struct HorovodConfig {
  std::vector<ConfigFlag> flags;
  std::vector<std::string> ignored_keys;  // "FILE:LINE: section.key", Horovod does not read them
};

Result<HorovodConfig> read_horovod_config_file(const std::string& path);

// The same from text (`path` names it in messages).
Result<HorovodConfig> parse_horovod_config(const std::string& text, const std::string& path);

}  // namespace hvrun::launcher
