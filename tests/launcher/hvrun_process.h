// A running hvrun for tests that must act while it runs (signal it, kill it, read its output as
// it comes). Everything is bounded by deadlines; the destructor kills hvrun's process group and
// every pid the test registered, so nothing outlives the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvrun::test {

class HvrunProcess {
 public:
  // Starts <build>/bin/hvrun with `args` and the test's environment plus `env`.
  HvrunProcess(const std::vector<std::string>& args, const std::map<std::string, std::string>& env);
  ~HvrunProcess();
  HvrunProcess(const HvrunProcess&) = delete;
  HvrunProcess& operator=(const HvrunProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Reads output until `done(stdout_so_far)` holds or `timeout` passes; returns whether it held.
  bool read_until(const std::function<bool(const std::string&)>& done,
                  std::chrono::milliseconds timeout);

  // Waits for hvrun to exit (reading its output meanwhile); nullopt on timeout. The code is the
  // exit status, or 128+signal.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);

  // Pids the destructor also kills (the workers the test learnt about).
  void also_kill_on_exit(pid_t pid) { extra_pids_.push_back(pid); }

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  void pump(int timeout_ms);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool exited_ = false;
  int exit_code_ = -1;
  std::string out_, err_;
  std::vector<pid_t> extra_pids_;
};

// True when `pid` no longer runs: gone, or a zombie waiting for a reaper.
bool process_gone(pid_t pid);

// Polls process_gone for every pid until all are gone or `timeout` passes.
bool wait_all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout);

}  // namespace hvrun::test
