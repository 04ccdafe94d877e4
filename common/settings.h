// The settings registry: every tunable of hvrun, declared once (settings_catalog.cc) with its type,
// default, accepted range, description, CLI flag and HVRUN_* environment variable.
//
// Values are parsed and validated once, when they are set; a bad value is an error that names the
// setting, the value and what is accepted. Components read the values they need into their own
// option structs once at start (tests build those structs directly, without setenv).
//
// Precedence, lowest first: default < environment < config file (hvrun --config-file) <
// command-line flag < explicit override (Settings::set with SettingSource::kOverride, used by
// tests and embedding code). In the environment a setting's HVRUN_* variable wins over the
// HOROVOD_* variable that means the same (common/horovod_variables.h, read in Horovod's units).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace hvrun {

enum class SettingKind { kBool, kInt, kDouble, kString, kChoice };
enum class SettingSource { kDefault, kEnvironment, kConfigFile, kFlag, kOverride };

std::string_view setting_source_name(SettingSource source);

// Whether `value` is one of the '|'-separated words of `bar_separated` ("auto|on|off").
bool is_one_of(std::string_view bar_separated, std::string_view value);

struct SettingSpec {
  std::string_view name;           // registry key, e.g. "fusion_threshold_mb"
  std::string_view flag;           // e.g. "--fusion-threshold-mb"
  std::string_view env;            // e.g. "HVRUN_FUSION_THRESHOLD"
  SettingKind kind;
  std::string_view default_value;  // in the same text form a user would write
  double min = 0;                  // kInt / kDouble: inclusive range
  double max = 0;
  std::string_view choices;        // kChoice: '|'-separated, e.g. "auto|on|off"
  // kChoice: other spellings of a choice, '|'-separated "alias=choice" (Horovod's "warning").
  std::string_view choice_aliases;
  // What the flag given without a value means ("true" for every kBool); empty: it needs one.
  // A flag with a bare meaning takes a value only as --flag=VALUE, never the next word.
  std::string_view bare_value;
  std::string_view unit;           // shown in help and errors, e.g. "MiB"
  std::string_view scope;          // "launcher", "coordinator" or "worker"
  std::string_view description;
};

// The whole catalogue, in the order --print-config and --help show it.
std::span<const SettingSpec> all_settings();
const SettingSpec* find_setting(std::string_view name);
const SettingSpec* find_setting_by_flag(std::string_view flag);
const SettingSpec* find_setting_by_env(std::string_view env);

// A typed name for one registered setting (see setting_keys below).
template <typename T>
struct SettingKey {
  std::string_view name;
};

class Settings {
 public:
  using Value = std::variant<bool, int64_t, double, std::string>;

  // Every setting at its default.
  Settings();

  // Reads every registered HVRUN_* variable that `getenv` returns a value for, and for a
  // setting without one, the HOROVOD_* variable of the same meaning. HOROVOD_* variables that
  // ask for what hvrun cannot do are an error; those that change nothing add a note.
  Status apply_environment(const std::function<const char*(const char*)>& getenv);
  Status apply_process_environment();

  // Sets from a command-line flag. `value` is empty for a bare boolean flag (`--verbose`).
  Status apply_flag(std::string_view flag, std::string_view value, bool has_value);

  // Sets by registry name. `origin` says where the text came from, for --print-config (a
  // variable, a file and line); empty: the setting's flag, or nothing for an override.
  Status set(std::string_view name, std::string_view text, SettingSource source,
             std::string_view origin = {});

  bool get(SettingKey<bool> key) const { return std::get<bool>(entry(key.name).value); }
  int64_t get(SettingKey<int64_t> key) const { return std::get<int64_t>(entry(key.name).value); }
  double get(SettingKey<double> key) const { return std::get<double>(entry(key.name).value); }
  const std::string& get(SettingKey<std::string> key) const {
    return std::get<std::string>(entry(key.name).value);
  }

  SettingSource source(std::string_view name) const { return entry(name).source; }
  // Who set it: "HOROVOD_CYCLE_TIME", "--cycle-time-ms", "hvrun.yaml:4"; empty for the default.
  const std::string& origin(std::string_view name) const { return entry(name).origin; }
  // One line per HOROVOD_* variable of the environment that was accepted but changes nothing.
  const std::vector<std::string>& notes() const { return notes_; }
  const std::string& text(std::string_view name) const { return entry(name).text; }

  // The table `--print-config` shows: every setting, its value and where it came from.
  void print(std::ostream& out) const;

  // HVRUN_*=value for every setting not at its default, so a launcher can hand its effective
  // configuration to the processes it starts.
  std::vector<std::pair<std::string, std::string>> non_default_environment() const;

 private:
  struct Entry {
    const SettingSpec* spec;
    Value value;
    std::string text;  // canonical text of value
    SettingSource source;
    std::string origin;
  };
  const Entry& entry(std::string_view name) const;
  Status assign(Entry& e, std::string_view text, SettingSource source, std::string_view given_as);
  Status apply_horovod_environment(const std::function<const char*(const char*)>& getenv);

  std::vector<Entry> entries_;
  std::vector<std::string> notes_;
};

// Parses `text` as the setting `spec` says; errors name the setting, the value and what is
// accepted. `given_as` is how the user spelled it (flag or variable), for the message.
Result<Settings::Value> parse_setting_value(const SettingSpec& spec, std::string_view text,
                                            std::string_view given_as);

}  // namespace hvrun
