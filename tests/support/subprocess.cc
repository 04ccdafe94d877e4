#include "tests/support/subprocess.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "tests/support/child_process.h"

namespace hvrun::test {

RunResult run_process(const std::vector<std::string>& argv, const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + options.timeout;
  ChildProcess child(argv, {.env = options.env, .stdin_text = options.stdin_text});
  if (!child.started()) throw std::runtime_error("cannot start " + argv.at(0));
  RunResult result;
  // Its output until both pipes end (the process may close them before it exits) ...
  while (child.output_open()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    child.pump(std::min(left, std::chrono::milliseconds(100)));
  }
  // ... then its exit, within the same deadline.
  std::optional<int> code;
  if (!result.timed_out) {
    code = child.wait_exit(std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now()));
    result.timed_out = !code.has_value();
  }
  if (!code) {
    child.kill_now();
    code = child.wait_exit(std::chrono::milliseconds(0));
  }
  child.kill_now();  // anything the program left behind in its group
  result.exit_code = code.value_or(-1);
  result.out = child.out();
  result.err = child.err();
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return result;
}

std::string bin_path(const std::string& name) {
  const char* dir = std::getenv("HVRUN_BIN_DIR");
  return std::string(dir != nullptr ? dir : HVRUN_TEST_BIN_DIR) + "/" + name;
}

std::vector<std::string> on_simulated_hosts(int hosts, const std::vector<std::string>& argv) {
  std::vector<std::string> wrapped = {"/bin/sh", "-c",
                                      "HVRUN_HOST=simhost$((HVRUN_RANK % " +
                                          std::to_string(hosts) +
                                          ")) HVRUN_LOCAL_RANK=-1 exec \"$0\" \"$@\""};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

std::vector<std::string> on_two_simulated_hosts(const std::vector<std::string>& argv) {
  return on_simulated_hosts(2, argv);
}

std::string source_dir() {
  const char* dir = std::getenv("HVRUN_SOURCE_DIR");
  return dir != nullptr ? dir : HVRUN_TEST_SOURCE_DIR;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace hvrun::test
