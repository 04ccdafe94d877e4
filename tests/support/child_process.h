// A program a test starts and keeps running while it acts (signals it, kills it, reads its output
// as it comes): in its own process group, stdout and stderr on pipes (or in a log file), the
// test's environment with the test's changes. Every wait is bounded; the destructor SIGKILLs the
// process group and every pid the test registered, and reaps the child, so nothing outlives the
// test. run_process() (subprocess.h) is this, run to its end.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvrun::test {

// Changes to the test's own environment: a value sets the variable, a null value removes it.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

struct ChildOptions {
  EnvChanges env;
  // Its stdin: this text, then end of file. nullopt: the test's own stdin.
  std::optional<std::string> stdin_text;
  // Non-empty: stdout and stderr go to this file (created or truncated) instead of pipes, for a
  // program whose output nobody reads as it runs.
  std::string log_file;
};

class ChildProcess {
 public:
  // argv[0] is a path, or a name looked up in PATH. A failed start leaves started() false.
  ChildProcess(const std::vector<std::string>& argv, const ChildOptions& options = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Reads output until `done(stdout so far)` holds or `timeout` passes; returns whether it held.
  bool read_until(const std::function<bool(const std::string&)>& done,
                  std::chrono::milliseconds timeout);
  // The next line of stdout (without its newline), or nullopt when `timeout` passes or stdout
  // ends first.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Reads whatever arrives within `timeout`; false once both pipes have ended.
  bool pump(std::chrono::milliseconds timeout);
  bool output_open() const { return out_fd_ >= 0 || err_fd_ >= 0; }

  // Waits for the exit (reading output meanwhile, then what is left in the pipes); nullopt on
  // timeout. The code is the exit status, or 128+signal.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // Whether it still runs (reaps it when it has exited).
  bool running();
  // SIGKILLs the process group and reaps the child (idempotent).
  void kill_now();
  // SIGTERM to the process group, then SIGKILL once `grace` passes without an exit.
  void stop(std::chrono::milliseconds grace);

  // Pids the destructor also kills (processes the test learnt about that left the group).
  void also_kill_on_exit(pid_t pid) { extra_pids_.push_back(pid); }

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool reap(bool block);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  std::string out_, err_;
  size_t lines_read_ = 0;  // how much of out_ read_line() has returned
  std::vector<pid_t> extra_pids_;
};

// <build>/bin/hvrun (subprocess.h's bin_path) with `args`, running, its stdin the test's own.
class HvrunProcess : public ChildProcess {
 public:
  HvrunProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env);
};

// True when `pid` no longer runs: gone, or a zombie waiting for a reaper.
bool process_gone(pid_t pid);

// Polls process_gone for every pid until all are gone or `timeout` passes.
bool wait_all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);

}  // namespace hvrun::test
