// horovodrun's flags (Horovod 0.28.1, horovod/runner/launch.py) that hvrun does not take under
// the same spelling and value form as a setting of its own: each one is a spelling of an hvrun
// setting, a switch that changes nothing here (a note says why), or a clear refusal that says
// why and what to use instead. horovodrun's flags that are spelled and mean the same in hvrun
// (-np, -H, --fusion-threshold-mb, --log-level, ...) are the registry's own (common/settings.h).
// Keep docs/horovod.md's flag table in step with this list.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace hvrun::launcher {

enum class HorovodFlagEffect {
  kSetting,        // sets `setting`: to `fixed` (a bare switch) or to the value given
  kNoEffect,       // accepted and validated as horovodrun does; `note` says why nothing changes
  kNoEffectIfOne,  // 1 is what hvrun does (a note); any other value is refused with `note`
  kUnsupported,    // refused: `note` says why, and what to use instead
};

// How horovodrun checks the value a flag takes (argparse's type=, config_parser's checks).
enum class HorovodValue { kText, kNonNegativeInt, kUnitInterval };

struct HorovodFlag {
  std::string_view spellings;  // '|'-separated: "--min-np|--min-num-proc"
  HorovodFlagEffect effect;
  int values = 0;              // words the flag takes after it (0: a bare switch)
  std::string_view setting = {};
  std::string_view fixed = {};
  std::string_view note = {};
  HorovodValue value_kind = HorovodValue::kText;
};

// The flag spelled `flag`, or null.
const HorovodFlag* find_horovod_flag(std::string_view flag);

// What `flag` (spelled as given) with `values` does: the setting text to apply (kSetting), or
// the one-line note to show (kNoEffect, and kNoEffectIfOne given 1), or the error.
struct HorovodFlagOutcome {
  std::optional<std::string> setting_text;
  std::string note;
};
Result<HorovodFlagOutcome> interpret_horovod_flag(const HorovodFlag& entry, std::string_view flag,
                                                  const std::vector<std::string>& values);

}  // namespace hvrun::launcher
