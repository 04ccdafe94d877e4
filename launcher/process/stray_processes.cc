#include "launcher/process/stray_processes.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "launcher/process/own_children.h"
#include "launcher/process/proc_table.h"

namespace hvrun::launcher {
namespace {

// Children of `self` that it did not start, with everything below them: strays. Zombies are
// skipped (nothing to end; reap_exited() collects them).
std::vector<ProcStat> stray_stats(bool zombies_too) {
  const pid_t self = ::getpid();
  const std::vector<ProcStat> all = list_processes();
  std::unordered_multimap<pid_t, const ProcStat*> children;
  for (const ProcStat& p : all) children.emplace(p.ppid, &p);
  std::vector<const ProcStat*> todo;
  auto [first, last] = children.equal_range(self);
  for (auto it = first; it != last; ++it)
    if (!is_own_child(it->second->pid)) todo.push_back(it->second);
  std::vector<ProcStat> strays;
  while (!todo.empty()) {
    const ProcStat* p = todo.back();
    todo.pop_back();
    if (p->alive() || zombies_too) strays.push_back(*p);
    auto [from, to] = children.equal_range(p->pid);
    for (auto it = from; it != to; ++it) todo.push_back(it->second);
  }
  return strays;
}

}  // namespace

std::vector<StrayProcess> find_strays() {
  std::vector<StrayProcess> strays;
  for (const ProcStat& p : stray_stats(false))
    strays.push_back({p.pid, process_command(p.pid), process_environment_value(p.pid, "HVRUN_RANK")});
  return strays;
}

StrayReaper::StrayReaper(std::chrono::milliseconds grace) : grace_(grace) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    spdlog::warn("cannot become a child subreaper ({}): processes that leave the workers' process "
                 "groups will not be found",
                 std::strerror(errno));
}

StrayReaper::Stray& StrayReaper::remember(const StrayProcess& process) {
  for (Stray& s : found_)
    if (s.process.pid == process.pid) return s;
  found_.push_back(Stray{process});
  spdlog::debug("stray process {} ({})", process.pid, process.command);
  return found_.back();
}

void StrayReaper::signal(int sig) {
  for (const StrayProcess& p : find_strays()) {
    Stray& s = remember(p);
    if (::kill(p.pid, sig) != 0) continue;
    s.last_signal = sig;
    if (sig == SIGKILL) {
      s.killed = true;
      continue;
    }
    ::kill(p.pid, SIGCONT);
    if (s.terminated == Clock::time_point{}) s.terminated = Clock::now();
  }
}

void StrayReaper::reap_exited() {
  for (const ProcStat& p : stray_stats(true)) {
    if (p.alive() || p.ppid != ::getpid()) continue;
    ::waitpid(p.pid, nullptr, WNOHANG);
  }
}

bool StrayReaper::settle(bool kill_at_once) {
  reap_exited();
  bool waiting = false;
  const auto now = Clock::now();
  for (const StrayProcess& p : find_strays()) {
    Stray& s = remember(p);
    if (s.killed) continue;
    if (s.terminated == Clock::time_point{} && !kill_at_once) {
      if (::kill(p.pid, SIGTERM) == 0) ::kill(p.pid, SIGCONT);
      s.terminated = now;
      s.last_signal = SIGTERM;
      waiting = true;
    } else if (kill_at_once || now - s.terminated >= grace_) {
      ::kill(p.pid, SIGKILL);
      s.killed = true;
      s.last_signal = SIGKILL;
    } else {
      waiting = true;
    }
  }
  return !waiting;
}

std::string StrayReaper::report() const {
  std::string text;
  for (const Stray& s : found_) {
    if (!text.empty()) text += "; ";
    text += "pid " + std::to_string(s.process.pid) + " (" + s.process.command + ")";
    if (!s.process.rank.empty()) text += " from rank " + s.process.rank;
    if (s.last_signal > 0) {
      const char* abbrev = ::sigabbrev_np(s.last_signal);
      text += ", sent SIG" + std::string(abbrev != nullptr ? abbrev : std::to_string(s.last_signal));
    }
  }
  return text;
}

bool StrayReaper::take_unreported() {
  const bool fresh = reported_ < found_.size();
  reported_ = found_.size();
  return fresh;
}

}  // namespace hvrun::launcher
