#include "tests/support/namespace_hosts.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "tests/support/subprocess.h"

namespace hvrun::test {

void NamespaceHosts::up(const std::string& script, const std::string& what,
                        const std::vector<std::string>& args) {
  script_ = source_dir() + "/scripts/" + script;
  std::string tmpl = "/tmp/hvrun-" + script + "-XXXXXX";
  dir_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "/tmp/hvrun-" + script;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(90);
  std::vector<std::string> argv = {script_, "up", dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = run_process(argv, opts);
  if (r.exit_code == 77) {
    skip_reason_ = what + " unavailable: " + r.err;
    return;
  }
  if (r.exit_code != 0) {
    error_ = "scripts/" + script + " up failed (" + std::to_string(r.exit_code) + "): " + r.err;
    return;
  }
  for (const std::string& line : split_lines(r.out)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) env_[line.substr(0, eq)] = line.substr(eq + 1);
  }
}

void NamespaceHosts::down() {
  if (script_.empty()) return;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(30);
  run_process({script_, "down", dir_}, opts);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  script_.clear();
}

}  // namespace hvrun::test
