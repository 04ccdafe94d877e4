// A host's health check as hvrun runs it: `hvrun health-check` on the host (started directly on
// this machine, through the remote shell elsewhere: the caller builds the command), one line
// back. Two uses: every host of a job before any rank starts (check_hosts), and an elastic job's
// hosts before each later rank there, without blocking the launcher's loop (HealthGate).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "launcher/health/health_checks.h"

namespace hvrun::launcher {

// The command that runs the health check on `host` for `slots` ranks there.
using HealthCommand = std::function<std::vector<std::string>(const std::string& host, int slots)>;

// Runs `argv` and reads its verdict, killing it when `deadline` passes. A command that gives no
// verdict (the remote shell failed, hvrun missing there) makes the host unhealthy with what it
// said.
HealthVerdict run_host_check(const std::vector<std::string>& argv,
                             std::chrono::milliseconds deadline);

struct HostToCheck {
  std::string host;
  int slots = 0;
};

// Checks every host at once (a thread each); the verdicts in `hosts`' order.
std::vector<HealthVerdict> check_hosts(const std::vector<HostToCheck>& hosts,
                                       const HealthCommand& command,
                                       std::chrono::milliseconds deadline);

// For an elastic job: whether a host may get new ranks now. A host is cleared by a check made
// since it last got ranks; asking about one not cleared starts its check (one at a time per
// host) on a thread of its own, whose verdict `checked` hears on the loop through `post`.
//
// Threads: the launcher's loop calls everything; the checks run on their own threads (joined on
// destruction; a verdict that arrives after it is dropped).
class HealthGate {
 public:
  using Post = std::function<void(std::function<void()>)>;
  using Checked = std::function<void(const std::string& host, const HealthVerdict& verdict)>;

  HealthGate(HealthCommand command, std::chrono::milliseconds deadline, Post post, Checked checked);
  ~HealthGate();
  HealthGate(const HealthGate&) = delete;
  HealthGate& operator=(const HealthGate&) = delete;

  // True when `host` passed a check since it last got ranks (the clearance is used up: ranks
  // start there now). Otherwise its check is started, unless one runs, and false.
  bool take_clearance(const std::string& host, int slots);

 private:
  void join_finished();

  struct Check {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  const HealthCommand command_;
  const std::chrono::milliseconds deadline_;
  const Post post_;
  const Checked checked_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for the verdicts posted late
  std::set<std::string> running_;                               // hosts whose check runs
  std::set<std::string> cleared_;  // hosts whose last check passed, not yet given ranks
  std::vector<Check> checks_;
};

}  // namespace hvrun::launcher
