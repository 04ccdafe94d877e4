// Runs a program for a test to its end: captured stdout/stderr, an environment of the test's
// choosing, and a hard deadline after which the whole process group is killed. Nothing outlives
// the call. (A program the test acts on while it runs: child_process.h.)
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvrun::test {

struct RunOptions {
  // Added to (or, with a null value, removed from) the test's own environment.
  std::map<std::string, std::optional<std::string>> env;
  std::chrono::milliseconds timeout{30000};
  std::string stdin_text;  // its stdin, then end of file
};

struct RunResult {
  int exit_code = -1;       // exit status, or 128+signal when killed by a signal
  bool timed_out = false;   // the deadline passed and the process group was killed
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};
};

RunResult run_process(const std::vector<std::string>& argv, const RunOptions& options = {});

// <build>/bin/NAME (HVRUN_BIN_DIR overrides <build>/bin).
std::string bin_path(const std::string& name);

// `argv` run as a rank on one of two simulated hosts, by the parity of its rank (HVRUN_HOST
// simhost0 / simhost1; the coordinator assigns local ranks): a multi-host job (the hierarchical
// data plane, the cross-host rounds) on this one machine. An empty `argv` gives the prefix alone
// (for a launcher that appends the rank's command).
std::vector<std::string> on_two_simulated_hosts(const std::vector<std::string>& argv = {});
// The same over `hosts` simulated hosts, by rank modulo `hosts` (simhost0 ... simhost<hosts-1>).
std::vector<std::string> on_simulated_hosts(int hosts, const std::vector<std::string>& argv);

// The source tree's root (HVRUN_SOURCE_DIR overrides it).
std::string source_dir();

// A file's whole content ("" when it cannot be read).
std::string read_file(const std::string& path);

// Lines of `text` without the trailing empty one.
std::vector<std::string> split_lines(const std::string& text);

}  // namespace hvrun::test
