#include "common/settings.h"

#include "common/horovod_variables.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace hvrun {
namespace {

std::string format_number(double v) {
  std::ostringstream out;
  out << std::setprecision(15) << v;
  return out.str();
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// [+-]digits[.digits][e[+-]digits], with at least one digit before or after the point.
bool is_decimal_number(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - from;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t mantissa = digits();
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string choices_text(std::string_view choices) {
  std::string out;
  size_t start = 0;
  while (start <= choices.size()) {
    size_t bar = choices.find('|', start);
    if (bar == std::string_view::npos) bar = choices.size();
    if (!out.empty()) out += ", ";
    out += choices.substr(start, bar - start);
    start = bar + 1;
  }
  return out;
}

// The choice `alias` stands for in `aliases` ("warning=warn|fatal=error"), or `alias` itself.
std::string resolve_alias(std::string_view aliases, const std::string& alias) {
  size_t start = 0;
  while (start < aliases.size()) {
    size_t bar = aliases.find('|', start);
    if (bar == std::string_view::npos) bar = aliases.size();
    const std::string_view pair = aliases.substr(start, bar - start);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == alias)
      return std::string(pair.substr(eq + 1));
    start = bar + 1;
  }
  return alias;
}

std::string expected_text(const SettingSpec& spec) {
  std::string unit = spec.unit.empty() ? "" : " (" + std::string(spec.unit) + ")";
  switch (spec.kind) {
    case SettingKind::kBool: return "true/false, 1/0, yes/no or on/off";
    case SettingKind::kInt:
      return "an integer from " + format_number(spec.min) + " to " + format_number(spec.max) + unit;
    case SettingKind::kDouble:
      return "a number from " + format_number(spec.min) + " to " + format_number(spec.max) + unit;
    case SettingKind::kString: return "any text" + unit;
    case SettingKind::kChoice: return "one of " + choices_text(spec.choices);
  }
  return "";
}

Status bad_value(const SettingSpec& spec, std::string_view text, std::string_view given_as) {
  std::string where = given_as.empty() ? std::string(spec.flag) : std::string(given_as);
  std::string other = where == spec.env ? std::string(spec.flag) : std::string(spec.env);
  return invalid_argument("invalid value '" + std::string(text) + "' for " + where + " (setting " +
                          std::string(spec.name) + ", also " + other + "): expected " +
                          expected_text(spec));
}

std::string canonical_text(const Settings::Value& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) return format_number(*d);
  return std::get<std::string>(v);
}

}  // namespace

bool is_one_of(std::string_view bar_separated, std::string_view value) {
  size_t start = 0;
  while (start <= bar_separated.size()) {
    size_t bar = bar_separated.find('|', start);
    if (bar == std::string_view::npos) bar = bar_separated.size();
    if (bar_separated.substr(start, bar - start) == value) return true;
    start = bar + 1;
  }
  return false;
}

std::string_view setting_source_name(SettingSource source) {
  switch (source) {
    case SettingSource::kDefault: return "default";
    case SettingSource::kEnvironment: return "environment";
    case SettingSource::kConfigFile: return "config-file";
    case SettingSource::kFlag: return "flag";
    case SettingSource::kOverride: return "override";
  }
  return "?";
}

const SettingSpec* find_setting(std::string_view name) {
  for (const SettingSpec& s : all_settings())
    if (s.name == name) return &s;
  return nullptr;
}

const SettingSpec* find_setting_by_flag(std::string_view flag) {
  for (const SettingSpec& s : all_settings())
    if (s.flag == flag) return &s;
  return nullptr;
}

const SettingSpec* find_setting_by_env(std::string_view env) {
  for (const SettingSpec& s : all_settings())
    if (s.env == env) return &s;
  return nullptr;
}

Result<Settings::Value> parse_setting_value(const SettingSpec& spec, std::string_view raw,
                                            std::string_view given_as) {
  // Numbers are taken exactly as written: a value with spaces, a hex prefix or trailing words
  // is more likely a mistake (a quoting slip, a unit typed after the number) than a number.
  std::string text = spec.kind == SettingKind::kInt || spec.kind == SettingKind::kDouble
                         ? std::string(raw)
                         : trim(raw);
  switch (spec.kind) {
    case SettingKind::kBool: {
      std::string l = lower(text);
      if (l == "1" || l == "true" || l == "yes" || l == "on") return Settings::Value(true);
      if (l == "0" || l == "false" || l == "no" || l == "off") return Settings::Value(false);
      return bad_value(spec, raw, given_as);
    }
    case SettingKind::kInt: {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
          static_cast<double>(v) < spec.min || static_cast<double>(v) > spec.max)
        return bad_value(spec, raw, given_as);
      return Settings::Value(v);
    }
    case SettingKind::kDouble: {
      // strtod rather than from_chars<double>: the latter is missing from older libstdc++. It
      // also reads hex, "inf" and "nan", so the text is first checked to be a decimal number.
      if (!is_decimal_number(text)) return bad_value(spec, raw, given_as);
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(text.c_str(), &end);
      if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(v) || v < spec.min ||
          v > spec.max)
        return bad_value(spec, raw, given_as);
      return Settings::Value(v);
    }
    case SettingKind::kString: return Settings::Value(std::string(raw));
    case SettingKind::kChoice: {
      std::string l = resolve_alias(spec.choice_aliases, lower(text));
      if (!is_one_of(spec.choices, l)) return bad_value(spec, raw, given_as);
      return Settings::Value(l);
    }
  }
  return internal_error("unknown setting kind");
}

Settings::Settings() {
  for (const SettingSpec& spec : all_settings()) {
    Result<Value> v = parse_setting_value(spec, spec.default_value, "default");
    assert(v.is_ok() && "a setting's default must parse");
    entries_.push_back(Entry{&spec, v.value(), canonical_text(v.value()), SettingSource::kDefault});
  }
}

const Settings::Entry& Settings::entry(std::string_view name) const {
  for (const Entry& e : entries_)
    if (e.spec->name == name) return e;
  assert(false && "unknown setting name: declare it in settings_catalog.cc");
  std::abort();
}

Status Settings::assign(Entry& e, std::string_view text, SettingSource source,
                        std::string_view given_as) {
  Result<Value> v = parse_setting_value(*e.spec, text, given_as);
  if (!v.is_ok()) return v.status();
  e.value = std::move(v).value();
  e.text = canonical_text(e.value);
  e.source = source;
  e.origin = std::string(given_as);
  return Status::ok();
}

Status Settings::apply_environment(const std::function<const char*(const char*)>& getenv) {
  for (Entry& e : entries_) {
    std::string env(e.spec->env);
    const char* value = getenv(env.c_str());
    if (value == nullptr) continue;
    HVRUN_RETURN_IF_ERROR(assign(e, value, SettingSource::kEnvironment, e.spec->env));
  }
  return apply_horovod_environment(getenv);
}

Status Settings::apply_horovod_environment(
    const std::function<const char*(const char*)>& getenv) {
  for (const HorovodVariable& v : horovod_variables()) {
    const std::string name(v.name);
    const char* value = getenv(name.c_str());
    if (value == nullptr) continue;
    if (v.use != HorovodVariableUse::kSetting) {
      HVRUN_ASSIGN_OR_RETURN(std::string note, horovod_value_note(v, value));
      if (!note.empty()) notes_.push_back(std::move(note));
      continue;
    }
    for (Entry& e : entries_) {
      if (e.spec->name != v.setting) continue;
      // The HVRUN_* variable, read first, says the same thing in hvrun's own terms.
      if (e.source == SettingSource::kEnvironment && e.origin == e.spec->env) break;
      HVRUN_ASSIGN_OR_RETURN(std::string text, horovod_value_as_setting(v, value));
      HVRUN_RETURN_IF_ERROR(assign(e, text, SettingSource::kEnvironment, v.name));
      break;
    }
  }
  return Status::ok();
}

Status Settings::apply_process_environment() {
  return apply_environment([](const char* name) { return std::getenv(name); });
}

Status Settings::apply_flag(std::string_view flag, std::string_view value, bool has_value) {
  for (Entry& e : entries_) {
    if (e.spec->flag != flag) continue;
    if (!has_value) {
      if (e.spec->kind == SettingKind::kBool) value = "true";
      else if (!e.spec->bare_value.empty()) value = e.spec->bare_value;
      else return invalid_argument(std::string(flag) + " needs a value: " + expected_text(*e.spec));
    }
    return assign(e, value, SettingSource::kFlag, flag);
  }
  return invalid_argument("unknown option " + std::string(flag));
}

Status Settings::set(std::string_view name, std::string_view text, SettingSource source,
                     std::string_view origin) {
  for (Entry& e : entries_)
    if (e.spec->name == name)
      return assign(e, text, source, origin.empty() ? e.spec->flag : origin);
  return invalid_argument("unknown setting '" + std::string(name) + "'");
}

void Settings::print(std::ostream& out) const {
  size_t name_w = 4, value_w = 5;
  for (const Entry& e : entries_) {
    name_w = std::max(name_w, e.spec->name.size());
    value_w = std::max(value_w, e.text.size() + 2);
  }
  out << std::left << std::setw(static_cast<int>(name_w) + 2) << "SETTING"
      << std::setw(static_cast<int>(value_w) + 2) << "VALUE" << std::setw(38) << "FLAG"
      << std::setw(36) << "VARIABLE" << "SOURCE\n";
  for (const Entry& e : entries_) {
    std::string shown = e.spec->kind == SettingKind::kString ? "'" + e.text + "'" : e.text;
    std::string source(setting_source_name(e.source));
    if (e.source != SettingSource::kDefault && !e.origin.empty()) source += " " + e.origin;
    out << std::left << std::setw(static_cast<int>(name_w) + 2) << e.spec->name
        << std::setw(static_cast<int>(value_w) + 2) << shown << std::setw(38) << e.spec->flag
        << std::setw(36) << e.spec->env << source << "\n";
  }
}

std::vector<std::pair<std::string, std::string>> Settings::non_default_environment() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Entry& e : entries_)
    if (e.source != SettingSource::kDefault) out.emplace_back(std::string(e.spec->env), e.text);
  return out;
}

}  // namespace hvrun
