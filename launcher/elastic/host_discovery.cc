#include "launcher/elastic/host_discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "launcher/process/own_children.h"
#include "launcher/supervisor/job_summary.h"

namespace hvrun::launcher {

Result<std::vector<HostSlots>> parse_discovered_hosts(const std::string& output,
                                                      int slots_per_host) {
  std::vector<HostSlots> hosts;
  std::unordered_map<std::string, size_t> index;  // host -> its place in `hosts`
  std::istringstream in(output);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    HostSlots entry;
    const size_t colon = line.rfind(':');
    if (colon == std::string::npos) {
      if (slots_per_host <= 0)
        return invalid_argument("host discovery line " + std::to_string(number) + " '" + line +
                                "' gives no slots: print host:slots, or set --slots-per-host");
      entry = {line, slots_per_host};
    } else {
      const std::string count = line.substr(colon + 1);
      char* end = nullptr;
      const long slots = std::strtol(count.c_str(), &end, 10);
      if (count.empty() || *end != '\0' || slots < 0 || slots > 4096 || colon == 0)
        return invalid_argument("host discovery line " + std::to_string(number) + " '" + line +
                                "' is not host:slots (slots from 0 to 4096)");
      entry = {line.substr(0, colon), static_cast<int>(slots)};
    }
    // By name, not by a scan of the hosts so far: a script may list thousands each second.
    if (auto [at, added] = index.emplace(entry.host, hosts.size()); added)
      hosts.push_back(entry);
    else
      hosts[at->second].slots = entry.slots;
  }
  return hosts;
}

Result<std::string> run_discovery_script(const std::string& script,
                                         std::chrono::milliseconds deadline) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return internal_error(std::string("host discovery: pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return internal_error(std::string("host discovery: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  record_own_child(pid);
  ::close(out[1]);
  std::string text;
  const auto until = std::chrono::steady_clock::now() + deadline;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > (1u << 20)) break;  // a runaway script: enough to judge it by
  }
  ::close(out[0]);
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return deadline_exceeded("host discovery script '" + script + "' did not finish within " +
                             std::to_string(deadline.count() / 1000) + " s (killed)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return failed_precondition("host discovery script '" + script + "' " +
                               describe_wait_status(status));
  return text;
}

DiscoveryThread::DiscoveryThread(std::string script, int slots_per_host, Found found)
    : script_(std::move(script)), slots_per_host_(slots_per_host), found_(std::move(found)) {
  thread_ = std::thread([this] { loop(); });
}

DiscoveryThread::~DiscoveryThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void DiscoveryThread::loop() {
  for (;;) {
    auto output = run_discovery_script(script_, kDiscoveryDeadline);
    found_(output.is_ok() ? parse_discovered_hosts(*output, slots_per_host_)
                          : Result<std::vector<HostSlots>>(output.status()));
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_cv_.wait_for(lock, kDiscoveryInterval, [&] { return stop_; })) return;
  }
}

}  // namespace hvrun::launcher
