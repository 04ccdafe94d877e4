// The HOROVOD_* environment variables of Horovod 0.28.1 and what each one does in hvrun, so a
// Horovod job's environment (its scripts, job files, `mpirun -x`) keeps its meaning.
//
// A variable either sets a setting of the registry, read in Horovod's units and converted to
// hvrun's (HOROVOD_FUSION_THRESHOLD is bytes, --fusion-threshold-mb MiB); or asks for what hvrun
// does anyway, or for nothing that changes a result (a note says so); or asks for something
// hvrun cannot do (an error that says why and what to use instead). Variables that horovodrun
// sets for its workers, and Horovod's build-time variables, are recognised and left alone.
// The registry's own HVRUN_* variable wins when both are set (Settings::apply_environment).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hvrun {

enum class HorovodVariableUse {
  kSetting,             // sets `setting`, read as `reading` says
  kNoEffect,            // accepted; `note` says why it changes nothing
  kUnsupported,         // any value asks for what `note` says hvrun lacks
  kUnsupportedWhenOn,   // an integer > 0 asks for what `note` says hvrun lacks; 0 has no effect
  kUnsupportedUnlessOne,   // only 1 is what hvrun does
  kUnsupportedUnlessGloo,  // only "gloo" (any case) is what hvrun does
  kSetByLauncher,       // horovodrun sets it for its workers; hvrun sets its own
  kBuildTime,           // read by Horovod's setup.py only
};

// How a kSetting variable's text becomes the setting's text.
enum class HorovodReading {
  kSame,           // the same unit and form as the setting
  kBytesToMiB,     // an integer count of bytes -> MiB
  kFlagOnOff,      // an integer: > 0 -> "on", otherwise "off" (Horovod's strtol > 0)
  kFlagTrue,       // an integer: > 0 -> "true", otherwise "false"
  kFlagFalse,      // an integer: > 0 -> "false", otherwise "true" (a *_DISABLE / *_HIDE_* variable)
  kTimelinePath,   // a file name, or DYNAMIC: no file now, started at run time (start_timeline)
  kCpuOperations,  // GLOO -> "gloo"; MPI and CCL are refused
};

struct HorovodVariable {
  std::string_view name;
  HorovodVariableUse use;
  std::string_view setting = {};  // kSetting: the registry name
  HorovodReading reading = HorovodReading::kSame;
  std::string_view note = {};     // kNoEffect / kUnsupported*: why, and what to use instead
};

// Every variable hvrun recognises, in the order docs/horovod.md lists them.
std::span<const HorovodVariable> horovod_variables();
// The variable `name`, also by prefix for Horovod's HOROVOD_WITH_* / HOROVOD_WITHOUT_* build
// switches; null for a name hvrun does not know.
const HorovodVariable* find_horovod_variable(std::string_view name);

// `value` of the kSetting variable `v` as the text its setting parses; an error names the
// variable, the value and the Horovod form expected.
Result<std::string> horovod_value_as_setting(const HorovodVariable& v, std::string_view value);

// For a variable that is not a setting: an error when `value` asks for what hvrun cannot do,
// else the one-line note to show ("" for variables a launcher or a build sets).
Result<std::string> horovod_value_note(const HorovodVariable& v, std::string_view value);

// The HOROVOD_* names among `names` that hvrun does not know, for one warning that lists them.
std::vector<std::string> unknown_horovod_variables(const std::vector<std::string>& names);

// That warning for this process's environment ("" when every HOROVOD_* name is known).
std::string unknown_horovod_variables_warning();

}  // namespace hvrun
