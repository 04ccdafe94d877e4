#include "launcher/health/host_health.h"

#include <sstream>

#include "launcher/doctor/child_process.h"
#include "launcher/process/own_children.h"

namespace hvrun::launcher {

namespace {

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

}  // namespace

HealthVerdict run_host_check(const std::vector<std::string>& argv,
                             std::chrono::milliseconds deadline) {
  // env finds the remote shell on PATH as the agents' start does.
  std::vector<std::string> command = {"/usr/bin/env"};
  command.insert(command.end(), argv.begin(), argv.end());
  const doctor::ChildResult r = doctor::run_child_process(
      command, {}, static_cast<double>(deadline.count()) / 1000.0, record_own_child);
  HealthVerdict verdict;
  std::istringstream lines(r.output);
  std::string line;
  std::string said;  // what else came, for a check that gave no verdict
  while (std::getline(lines, line)) {
    line = trimmed(line);
    if (line.rfind("unhealthy: ", 0) == 0) {
      verdict.healthy = false;
      verdict.reason = line.substr(11);
      return verdict;
    }
    if (line == "healthy" || line.rfind("healthy; ", 0) == 0) {
      for (size_t at = line.find("; "); at != std::string::npos; at = line.find("; ", at + 2)) {
        const size_t next = line.find("; ", at + 2);
        verdict.notes.push_back(
            line.substr(at + 2, next == std::string::npos ? next : next - at - 2));
      }
      return verdict;
    }
    if (!line.empty()) said = line;
  }
  verdict.healthy = false;
  verdict.reason =
      r.timed_out ? "its health check did not answer within " + seconds_text(deadline) + " s"
                  : "its health check did not run (exit code " + std::to_string(r.exit_code) + ")";
  if (!said.empty()) verdict.reason += ": " + said;
  return verdict;
}

std::vector<HealthVerdict> check_hosts(const std::vector<HostToCheck>& hosts,
                                       const HealthCommand& command,
                                       std::chrono::milliseconds deadline) {
  std::vector<HealthVerdict> verdicts(hosts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < hosts.size(); ++i)
    threads.emplace_back(
        [&, i] { verdicts[i] = run_host_check(command(hosts[i].host, hosts[i].slots), deadline); });
  for (std::thread& t : threads) t.join();
  return verdicts;
}

HealthGate::HealthGate(HealthCommand command, std::chrono::milliseconds deadline, Post post,
                       Checked checked)
    : command_(std::move(command)),
      deadline_(deadline),
      post_(std::move(post)),
      checked_(std::move(checked)) {}

HealthGate::~HealthGate() {
  *alive_ = false;
  for (Check& c : checks_) c.thread.join();
}

bool HealthGate::take_clearance(const std::string& host, int slots) {
  join_finished();
  if (cleared_.erase(host) > 0) return true;
  if (!running_.insert(host).second) return false;
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::string> argv = command_(host, slots);
  checks_.push_back(Check{
      std::thread([this, host, argv = std::move(argv), done, alive = std::weak_ptr<bool>(alive_)] {
        HealthVerdict verdict = run_host_check(argv, deadline_);
        post_([this, host, verdict = std::move(verdict), alive] {
          const std::shared_ptr<bool> still = alive.lock();
          if (!still || !*still) return;
          running_.erase(host);
          if (verdict.healthy) cleared_.insert(host);
          checked_(host, verdict);
        });
        *done = true;
      }),
      done});
  return false;
}

void HealthGate::join_finished() {
  for (auto it = checks_.begin(); it != checks_.end();) {
    if (*it->done) {
      it->thread.join();
      it = checks_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace hvrun::launcher
