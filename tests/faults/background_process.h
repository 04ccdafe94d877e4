// A process a fault test keeps running while it acts (hvrun-coordinator, to kill it mid-job):
// started in its own process group, stdout readable line by line, stderr in a file. The
// destructor SIGKILLs its process group and reaps it, so nothing outlives the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hvrun::test {

class BackgroundProcess {
 public:
  BackgroundProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // The next line of stdout, or nullopt when `timeout` passes or stdout closes first.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // SIGKILLs the process group and reaps the process (idempotent).
  void kill_now();
  // What it wrote to stderr so far.
  std::string stderr_text() const;

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string pending_;
  std::string err_path_;
  bool reaped_ = false;
};

}  // namespace hvrun::test
