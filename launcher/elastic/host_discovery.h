// --host-discovery-script: the program that says which hosts an elastic job may use. It prints
// one host per line, "host:slots" or "host" (then --slots-per-host slots); blank lines and
// '#' comments are ignored. hvrun runs it every kDiscoveryInterval with a deadline; a run
// that fails or times out changes nothing (the hosts known stay), and is said once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "launcher/options/options.h"

namespace hvrun::launcher {

inline constexpr std::chrono::seconds kDiscoveryInterval{1};
inline constexpr std::chrono::seconds kDiscoveryDeadline{10};

// The hosts in the script's output (a host named twice: the last line counts).
Result<std::vector<HostSlots>> parse_discovered_hosts(const std::string& output,
                                                      int slots_per_host);

// Runs `script` (through /bin/sh -c, so it may carry arguments) and returns its stdout; an
// error names the script and says how it ended. The script's process group is killed when
// `deadline` passes.
Result<std::string> run_discovery_script(const std::string& script,
                                         std::chrono::milliseconds deadline);

// Runs the script every kDiscoveryInterval on a thread of its own and hands each outcome to
// `found` (on that thread: post it to the loop that acts on it) until destroyed.
class DiscoveryThread {
 public:
  using Found = std::function<void(Result<std::vector<HostSlots>>)>;
  DiscoveryThread(std::string script, int slots_per_host, Found found);
  ~DiscoveryThread();  // stops and joins (a script running is waited for, up to its deadline)
  DiscoveryThread(const DiscoveryThread&) = delete;
  DiscoveryThread& operator=(const DiscoveryThread&) = delete;

 private:
  void loop();

  const std::string script_;
  const int slots_per_host_;
  const Found found_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hvrun::launcher
