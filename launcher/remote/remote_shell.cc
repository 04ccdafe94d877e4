#include "launcher/remote/remote_shell.h"

#include <cmath>
#include <sstream>

#include "common/setting_keys.h"

namespace hvrun::launcher {
namespace {

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool is_ssh(const std::string& program) {
  size_t slash = program.rfind('/');
  return program.substr(slash == std::string::npos ? 0 : slash + 1) == "ssh";
}

std::string trim_lines(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    if (!out.empty()) out += " / ";
    out += line;
  }
  return out;
}

}  // namespace

RemoteShellOptions RemoteShellOptions::from_settings(const Settings& settings,
                                                     bool in_slurm_allocation) {
  RemoteShellOptions o;
  const std::string launcher = settings.get(setting::kRemoteLauncher);
  o.srun = launcher == "srun" || (launcher == "auto" && in_slurm_allocation);
  o.srun_args = settings.get(setting::kSrunArgs);
  o.rsh = settings.get(setting::kRsh);
  o.port = static_cast<int>(settings.get(setting::kSshPort));
  o.identity_file = settings.get(setting::kSshIdentityFile);
  o.connect_timeout_s = settings.get(setting::kStartTimeoutSeconds);
  return o;
}

bool shapes_srun_tasks(const std::string& name) {
  static const char* const kNames[] = {
      "SLURM_NTASKS",        "SLURM_NPROCS",          "SLURM_NTASKS_PER_NODE",
      "SLURM_NTASKS_PER_SOCKET", "SLURM_NTASKS_PER_CORE", "SLURM_NTASKS_PER_GPU",
      "SLURM_CPUS_PER_TASK", "SLURM_CPUS_PER_GPU",    "SLURM_GPUS_PER_TASK",
      "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_SOCKET", "SLURM_TRES_PER_TASK",
      "SLURM_MEM_PER_CPU",   "SLURM_MEM_PER_GPU",     "SLURM_MEM_PER_NODE",
      "SLURM_DISTRIBUTION",  "SLURM_CPU_BIND",        "SLURM_GPU_BIND"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::vector<std::string> remote_agent_command(const RemoteShellOptions& options,
                                              const std::string& host,
                                              const std::string& hvrun_path) {
  return remote_hvrun_command(options, host, hvrun_path, {"agent"});
}

std::vector<std::string> remote_hvrun_command(const RemoteShellOptions& options,
                                              const std::string& host,
                                              const std::string& hvrun_path,
                                              const std::vector<std::string>& words) {
  if (options.srun) {
    std::vector<std::string> argv = {"srun",         "--nodes=1",        "--ntasks=1",
                                     "--nodelist=" + host, "--overlap",  "--whole",
                                     "--cpu-bind=none", "--unbuffered", "--kill-on-bad-exit=1",
                                     "--quiet", "--job-name=hvrun-agent"};
    for (const std::string& w : split_words(options.srun_args)) argv.push_back(w);
    argv.push_back(hvrun_path);
    argv.insert(argv.end(), words.begin(), words.end());
    return argv;
  }
  std::vector<std::string> argv = split_words(options.rsh);
  if (argv.empty()) argv.push_back("ssh");
  if (is_ssh(argv[0])) {
    argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o",
                             "ConnectTimeout=" + std::to_string(static_cast<int>(std::max(
                                                     1.0, std::ceil(options.connect_timeout_s))))});
  }
  if (options.port > 0) argv.insert(argv.end(), {"-p", std::to_string(options.port)});
  if (!options.identity_file.empty()) argv.insert(argv.end(), {"-i", options.identity_file});
  argv.push_back(host);
  // One word for the remote user's shell; a bare word (the subcommand) needs no quotes.
  std::string remote = shell_quote(hvrun_path);
  for (const std::string& w : words) {
    const bool bare =
        !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyz-") == std::string::npos;
    remote += " " + (bare ? w : shell_quote(w));
  }
  argv.push_back(remote);
  return argv;
}

std::string describe_remote_failure(const std::string& host, const std::string& rsh_program,
                                    int exit_code, const std::string& stderr_text,
                                    const std::string& hvrun_path) {
  std::string said = trim_lines(stderr_text);
  std::string text = "host " + host + ": ";
  if (exit_code == 127 || said.find("No such file") != std::string::npos ||
      said.find("not found") != std::string::npos) {
    text += "hvrun is not installed at " + hvrun_path + " there (" + rsh_program +
            " exited with code " + std::to_string(exit_code) + (said.empty() ? "" : ": " + said) +
            "); install the same hvrun at the same path on every host";
  } else if (exit_code == 255 && is_ssh(rsh_program)) {
    text += "ssh failed" + (said.empty() ? std::string() : ": " + said) +
            "; check that `ssh -o BatchMode=yes " + host +
            " true` works without a password (see --ssh-port, --ssh-identity-file, --rsh)";
  } else {
    text += rsh_program + " exited with code " + std::to_string(exit_code) +
            " before hvrun agent answered" + (said.empty() ? "" : ": " + said);
  }
  return text;
}

}  // namespace hvrun::launcher
