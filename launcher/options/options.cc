#include "launcher/options/options.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "launcher/options/horovod_config_file.h"
#include "launcher/options/horovod_flags.h"

namespace hvrun::launcher {

Result<ExportSpec> parse_export(const std::string& text) {
  ExportSpec spec;
  size_t eq = text.find('=');
  spec.name = text.substr(0, eq);
  if (eq != std::string::npos) spec.value = text.substr(eq + 1);
  bool ok = !spec.name.empty() && std::isdigit(static_cast<unsigned char>(spec.name[0])) == 0;
  for (char c : spec.name) ok &= std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  if (!ok)
    return invalid_argument("-x '" + text +
                            "': expected NAME or NAME=VALUE with NAME made of "
                            "letters, digits and '_'");
  return spec;
}

namespace {

Result<int> parse_positive_int(const std::string& text, const std::string& what) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v <= 0)
    return invalid_argument(what + " must be a positive integer, got '" + text + "'");
  return v;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<std::vector<HostSlots>> parse_hosts(const std::string& text) {
  std::vector<HostSlots> hosts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = trim(item);
    if (item.empty()) return invalid_argument("-H '" + text + "': empty host entry");
    size_t colon = item.rfind(':');
    HostSlots h;
    if (colon == std::string::npos) {
      h.host = item;
      h.slots = 1;
    } else {
      h.host = item.substr(0, colon);
      auto slots = parse_positive_int(item.substr(colon + 1),
                                      "-H '" + item + "': the slot count after ':'");
      if (!slots.is_ok()) return slots.status();
      h.slots = *slots;
    }
    if (h.host.empty()) return invalid_argument("-H '" + item + "': missing host name before ':'");
    hosts.push_back(h);
  }
  if (hosts.empty()) return invalid_argument("-H needs host:slots[,host:slots...]");
  return hosts;
}

namespace {

// One hostfile line: "host", "host slots=N" (Horovod's and mpirun's form) or "host:N" (the -H
// form), each way of giving the slots at most once. An IPv6 address takes its slots as
// "slots=N" or "[address]:N": a bare one's colons are its own.
Result<HostSlots> parse_hostfile_line(const std::string& line, const std::string& where) {
  auto refuse = [&](const std::string& why) {
    return invalid_argument(where + ": " + why + " in '" + line +
                            "' (expected 'host', 'host slots=N' or 'host:N')");
  };
  std::istringstream words(line);
  std::string first;
  words >> first;
  HostSlots h{first, 1};
  bool slots_given = false;
  const size_t colon = first.rfind(':');
  const bool bracketed = first.size() > 2 && first.front() == '[' && colon != std::string::npos &&
                         colon > 0 && first[colon - 1] == ']';
  if (bracketed || (colon != std::string::npos && first.find(':') == colon)) {
    h.host = bracketed ? first.substr(1, colon - 2) : first.substr(0, colon);
    auto slots = parse_positive_int(first.substr(colon + 1), where + ": the slot count after ':'");
    if (!slots.is_ok()) return slots.status();
    h.slots = *slots;
    slots_given = true;
  }
  if (h.host.empty()) return refuse("no host name");
  for (std::string word; words >> word;) {
    if (word.rfind("slots=", 0) != 0) return refuse("unknown word '" + word + "'");
    if (slots_given) return refuse("the slots are given twice");
    auto slots = parse_positive_int(word.substr(6), where + ": slots");
    if (!slots.is_ok()) return slots.status();
    h.slots = *slots;
    slots_given = true;
  }
  return h;
}

}  // namespace

Result<std::vector<HostSlots>> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument("--hostfile " + path + ": cannot be read");
  std::vector<HostSlots> hosts;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    HVRUN_ASSIGN_OR_RETURN(
        HostSlots h,
        parse_hostfile_line(line, "--hostfile " + path + " line " + std::to_string(line_no)));
    hosts.push_back(h);
  }
  if (hosts.empty()) return invalid_argument("--hostfile " + path + " lists no hosts");
  return hosts;
}

namespace {

// Sets `name` from `text`. Network interfaces given more than once in one place add up, as
// horovodrun's --network-interface(s) do (a set of names).
Status set_setting(LaunchOptions& opts, std::string_view name, const std::string& text,
                   SettingSource source, const std::string& origin) {
  std::string value = text;
  if (name == "network_interface" && opts.settings.source(name) == source &&
      !opts.settings.text(name).empty())
    value = opts.settings.text(name) + "," + text;
  return opts.settings.set(name, value, source, origin);
}

// A horovodrun flag with its values: a setting, a note, or its refusal.
Status apply_horovod_flag(LaunchOptions& opts, const HorovodFlag& entry, const std::string& flag,
                          const std::vector<std::string>& values, SettingSource source,
                          const std::string& origin) {
  HVRUN_ASSIGN_OR_RETURN(HorovodFlagOutcome outcome, interpret_horovod_flag(entry, flag, values));
  if (!outcome.note.empty()) opts.notes.push_back(outcome.note);
  if (outcome.setting_text)
    return set_setting(opts, entry.setting, *outcome.setting_text, source, origin);
  return Status::ok();
}

// --config-file's keys, except those whose option the command line gave (which wins).
Status apply_config_file(LaunchOptions& opts, const std::set<std::string>& given) {
  HVRUN_ASSIGN_OR_RETURN(HorovodConfig config, read_horovod_config_file(opts.config_file));
  for (const std::string& key : config.ignored_keys)
    opts.notes.push_back(key + " is not a key Horovod reads; ignored");
  for (const ConfigFlag& f : config.flags) {
    bool overridden = false;
    for (const std::string& flag : f.same_option) overridden |= given.count(flag) > 0;
    if (overridden) continue;
    Status s;
    if (const SettingSpec* spec = find_setting_by_flag(f.flag)) {
      const std::string text = f.value ? *f.value
                               : spec->kind == SettingKind::kBool ? std::string("true")
                                                                   : std::string(spec->bare_value);
      s = set_setting(opts, spec->name, text, SettingSource::kConfigFile, f.origin);
    } else if (const HorovodFlag* entry = find_horovod_flag(f.flag)) {
      std::vector<std::string> values;
      if (f.value) values.push_back(*f.value);
      s = apply_horovod_flag(opts, *entry, f.flag, values, SettingSource::kConfigFile, f.origin);
    } else {
      s = internal_error("config key maps to an unknown flag " + f.flag);
    }
    if (!s.is_ok()) return s.with_context(f.origin);
  }
  return Status::ok();
}

}  // namespace

Result<LaunchOptions> parse_command_line(const std::vector<std::string>& args,
                                         const std::function<const char*(const char*)>& getenv) {
  LaunchOptions opts;
  HVRUN_RETURN_IF_ERROR(opts.settings.apply_environment(getenv));

  std::string hosts_text;
  std::set<std::string> given;  // the flags the command line gave
  size_t i = 0;
  auto take_value = [&](const std::string& flag, std::optional<std::string> inline_value)
      -> Result<std::string> {
    if (inline_value) return *inline_value;
    if (i + 1 >= args.size()) return invalid_argument(flag + " needs a value");
    return args[++i];
  };

  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;  // the command starts here

    std::string flag = arg;
    std::optional<std::string> inline_value;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }

    if (flag == "-np" || flag == "-n" || flag == "--num-proc" || flag == "--np") {
      HVRUN_ASSIGN_OR_RETURN(std::string v, take_value(flag, inline_value));
      HVRUN_ASSIGN_OR_RETURN(int n, parse_positive_int(v, flag));
      opts.num_proc = n;
    } else if (flag == "-H" || flag == "--hosts" || flag == "--host") {
      HVRUN_ASSIGN_OR_RETURN(hosts_text, take_value(flag, inline_value));
    } else if (flag == "--hostfile" || flag == "-hostfile") {
      HVRUN_ASSIGN_OR_RETURN(opts.hostfile, take_value(flag, inline_value));
    } else if (flag == "-x") {
      HVRUN_ASSIGN_OR_RETURN(std::string v, take_value(flag, inline_value));
      HVRUN_ASSIGN_OR_RETURN(ExportSpec spec, parse_export(v));
      opts.exports.push_back(spec);
    } else if (flag == "-p" || flag == "-i") {
      // ssh's own short names for --ssh-port and --ssh-identity-file.
      HVRUN_ASSIGN_OR_RETURN(std::string v, take_value(flag, inline_value));
      HVRUN_RETURN_IF_ERROR(
          opts.settings.apply_flag(flag == "-p" ? "--ssh-port" : "--ssh-identity-file", v, true));
    } else if (flag == "--config-file") {
      HVRUN_ASSIGN_OR_RETURN(opts.config_file, take_value(flag, inline_value));
    } else if (flag == "--print-config") {
      opts.print_config = true;
    } else if (flag == "--check-build" || flag == "-cb") {
      opts.check_build = true;
    } else if (flag == "--version" || flag == "-v") {
      opts.show_version = true;
    } else if (flag == "--help" || flag == "-h") {
      opts.show_help = true;
    } else if (const SettingSpec* spec = find_setting_by_flag(flag)) {
      given.insert(flag);
      // A flag with a meaning of its own when bare takes a value only after '=', so that the
      // word after it (the command, say) is never taken for one.
      if ((spec->kind == SettingKind::kBool || !spec->bare_value.empty()) && !inline_value) {
        HVRUN_RETURN_IF_ERROR(opts.settings.apply_flag(flag, "", false));
      } else {
        HVRUN_ASSIGN_OR_RETURN(std::string v, take_value(flag, inline_value));
        // horovodrun's form takes two words: --blacklist-cooldown-range MIN MAX.
        if (spec->name == "blacklist_cooldown_range" && !inline_value &&
            v.find(',') == std::string::npos && i + 1 < args.size() && !args[i + 1].empty() &&
            std::isdigit(static_cast<unsigned char>(args[i + 1][0])))
          v += "," + args[++i];
        HVRUN_RETURN_IF_ERROR(set_setting(opts, spec->name, v, SettingSource::kFlag, flag));
      }
    } else if (const HorovodFlag* entry = find_horovod_flag(flag)) {
      given.insert(flag);
      std::vector<std::string> values;
      if (inline_value && entry->values != 1)
        return invalid_argument(flag + " takes " + std::to_string(entry->values) +
                                " values, not '=" + *inline_value + "'");
      if (inline_value) values.push_back(*inline_value);
      while (static_cast<int>(values.size()) < entry->values) {
        if (i + 1 >= args.size()) return invalid_argument(flag + " needs a value");
        values.push_back(args[++i]);
      }
      HVRUN_RETURN_IF_ERROR(
          apply_horovod_flag(opts, *entry, flag, values, SettingSource::kFlag, flag));
    } else {
      return invalid_argument("unknown option '" + arg + "' (see hvrun --help)");
    }
  }
  for (; i < args.size(); ++i) opts.command.push_back(args[i]);

  // -x HVRUN_NAME=VALUE of a registered setting sets it as the variable in hvrun's own
  // environment would (a flag still wins): hvrun's coordinator and every worker then see the
  // same value, and a bad value is refused here, on one host or many alike.
  for (const ExportSpec& spec : opts.exports) {
    const SettingSpec* setting = find_setting_by_env(spec.name);
    if (setting == nullptr || !spec.value) continue;
    HVRUN_RETURN_IF_ERROR(
        parse_setting_value(*setting, *spec.value, "-x " + spec.name).status());
    if (opts.settings.source(setting->name) != SettingSource::kFlag)
      HVRUN_RETURN_IF_ERROR(opts.settings.set(setting->name, *spec.value,
                                              SettingSource::kEnvironment, "-x " + spec.name));
  }
  if (!opts.config_file.empty()) HVRUN_RETURN_IF_ERROR(apply_config_file(opts, given));

  if (!hosts_text.empty() && !opts.hostfile.empty())
    return invalid_argument("give either -H or --hostfile, not both");
  if (!hosts_text.empty()) {
    HVRUN_ASSIGN_OR_RETURN(opts.hosts, parse_hosts(hosts_text));
  } else if (!opts.hostfile.empty()) {
    HVRUN_ASSIGN_OR_RETURN(opts.hosts, read_hostfile(opts.hostfile));
  }
  return opts;
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: hvrun [options] COMMAND [ARGS...]\n\n"
         "Runs COMMAND as a data-parallel job: one worker process per slot.\n\n"
         "Job:\n"
         "  -np, --num-proc N        number of worker processes (default: the slots of -H,\n"
         "                           else one per GPU found, else 1)\n"
         "  -H, --hosts H:S[,H:S]    hosts and their slots, e.g. localhost:2\n"
         "  --hostfile FILE          lines 'host slots=N' (or 'host:N', or 'host' for 1 slot)\n"
         "  -x NAME[=VALUE]          set NAME for every rank (repeatable; -x NAME passes this\n"
         "                           host's value); multi-host jobs\n"
         "                           forward the environment except HOSTNAME, SSH_*, DISPLAY, ...\n"
         "  -p, -i                   short for --ssh-port, --ssh-identity-file\n"
         "  --config-file FILE       Horovod's YAML file of parameters (flags win over it)\n"
         "  --print-config           print every setting, its value and its source, then exit\n"
         "  --check-build            print what this build contains (CUDA, NCCL, Gloo, MPI)\n"
         "  --version                print the version\n"
         "  --                       end of hvrun's options (the command may start with '-')\n"
         "  every horovodrun flag    as horovodrun takes it (docs/horovod.md): a spelling of\n"
         "                           a setting below, a note where it changes nothing, or an\n"
         "                           error saying what to use instead\n\n"
         "Subcommands:\n"
         "  hvrun timeline-check FILE [--require-ranks N] [--require-phases p,q]\n"
         "                           read a --timeline-filename file (also one left by a killed\n"
         "                           job) and print its events per rank and phase\n"
         "  hvrun dump PID [--autopsy-dir DIR]\n"
         "                           an autopsy of the running job of hvrun PID (SIGUSR1 to it):\n"
         "                           print the report it writes (docs/autopsy.md)\n\n"
         "Settings (flag, environment variable, default):\n";
  for (const SettingSpec& s : all_settings()) {
    std::string flag(s.flag);
    const std::string value = s.unit.empty() ? std::string("VALUE") : std::string(s.unit);
    if (s.kind != SettingKind::kBool)
      flag += s.bare_value.empty() ? " " + value : "[=" + value + "] (bare: " +
                                                      std::string(s.bare_value) + ")";
    out << "  " << flag << "\n      " << s.description << "\n      [" << s.env
        << ", default " << (s.default_value.empty() ? "none" : std::string(s.default_value))
        << (s.kind == SettingKind::kChoice ? ", one of " + std::string(s.choices) : "") << "]\n";
  }
  return out.str();
}

}  // namespace hvrun::launcher
