#include "launcher/remote/agent_links.h"

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <sstream>

#include "launcher/process/worker_process.h"
#include "launcher/supervisor/job_verdict.h"

namespace hvrun::launcher {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr std::chrono::milliseconds kShellKillAfterGrace{5000};
constexpr size_t kShellErrKept = 4096;  // enough for ssh's last lines; the summary shows them
}  // namespace

AgentLinks::AgentLinks(asio::io_context& io, std::vector<WorkerRecord>& records,
                       RankOutput& output, ChildrenEvents& events, bool verbose)
    : io_(io), records_(records), output_(output), events_(events), verbose_(verbose),
      shell_timer_(io) {}

AgentLinks::~AgentLinks() {
  for (auto& link : links_)
    if (link->agent.in_fd >= 0) ::close(link->agent.in_fd);
}

WorkerRecord* AgentLinks::record(long long rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= records_.size()) return nullptr;
  return &records_[static_cast<size_t>(rank)];
}

void AgentLinks::start(std::vector<AgentLink> links, PreStartHooks hooks) {
  const size_t first = links_.size();
  for (AgentLink& agent : links) {
    auto link = std::make_unique<Link>();
    link->agent = std::move(agent);
    link->hooks = hooks;
    link->out = std::make_unique<asio::posix::stream_descriptor>(io_, link->agent.out_fd);
    link->out_open = true;
    if (link->agent.err_fd >= 0) {
      link->err = std::make_unique<asio::posix::stream_descriptor>(io_, link->agent.err_fd);
      link->err_open = true;
    }
    links_.push_back(std::move(link));
  }
  for (size_t i = first; i < links_.size(); ++i) {
    read_frames(i);
    if (links_[i]->err_open) read_shell_err(i);
  }
}

size_t AgentLinks::add(AgentLink link, PreStartHooks hooks) {
  std::vector<AgentLink> one;
  one.push_back(std::move(link));
  start(std::move(one), std::move(hooks));
  return links_.size() - 1;
}

void AgentLinks::link_started(size_t index) { links_.at(index)->started = true; }

void AgentLinks::add_rank(int rank, size_t index) {
  const auto r = static_cast<size_t>(rank);
  if (link_of_rank_.size() <= r) link_of_rank_.resize(r + 1, SIZE_MAX);
  link_of_rank_[r] = index;
}

bool AgentLinks::stop_rank(int rank) {
  const auto r = static_cast<size_t>(rank);
  if (r >= link_of_rank_.size() || link_of_rank_[r] >= links_.size()) return false;
  Link& link = *links_[link_of_rank_[r]];
  if (link.judged || link.agent.exited) return false;
  if (WorkerRecord* w = record(rank)) w->signalled_by_hvrun = true;
  return link.agent.send(encode_frame("STOP", {std::to_string(rank)}));
}

bool AgentLinks::send_to(const std::string& host, const std::string& frame) {
  for (auto& link : links_) {
    const AgentLink& a = link->agent;
    if (a.host == host && link->started && !link->judged && !a.exited && a.in_fd >= 0)
      return link->agent.send(frame);
  }
  return false;
}

bool AgentLinks::takes_ranks(size_t index) const {
  const Link& l = *links_.at(index);
  return l.started && !l.bye && !l.judged && !l.agent.exited && l.agent.in_fd >= 0;
}

std::vector<AgentLink*> AgentLinks::agents() {
  std::vector<AgentLink*> out;
  for (auto& link : links_) out.push_back(&link->agent);
  return out;
}

void AgentLinks::job_started(std::vector<size_t> link_of_rank) {
  link_of_rank_ = std::move(link_of_rank);
  job_started_ = true;
  for (auto& link : links_) link->started = true;
}

void AgentLinks::abandon() {
  bool waits = false;
  for (auto& link : links_) {
    AgentLink& a = link->agent;
    if (a.in_fd >= 0) ::close(a.in_fd);
    a.in_fd = -1;
    if (a.pid <= 0 || a.exited) continue;
    // srun cancels its step (and whatever runs in it) on SIGTERM; SIGKILL would leave the step
    // to end only once its task sees stdin close.
    const bool srun = a.program == "srun";
    ::kill(-a.pid, srun ? SIGTERM : SIGKILL);
    waits |= srun;
  }
  if (!waits) return;
  shell_timer_.expires_after(kShellKillAfterGrace);
  shell_timer_.async_wait([this](error_code ec) {
    if (ec) return;
    for (auto& link : links_)
      if (!link->agent.exited && link->agent.pid > 0) ::kill(-link->agent.pid, SIGKILL);
  });
}

bool AgentLinks::feed_frames(size_t index, const char* data, size_t n) {
  Link& l = *links_[index];
  l.agent.reader.feed(std::string_view(data, n));
  while (true) {
    auto frame = l.agent.reader.next();
    if (!frame.is_ok()) {
      std::string what = "host " + l.agent.host + ": " + frame.status().message();
      if (l.started) {
        events_.say(what);
      } else if (l.agent.failure.empty()) {
        l.agent.failure = what + " (is something on that host printing to stdout at login?)";
        l.hooks.progress();
      }
      return false;
    }
    if (!frame->has_value()) return true;
    on_frame(index, **frame);
  }
}

void AgentLinks::close_frames(size_t index) {
  Link& l = *links_[index];
  if (!l.out_open) return;
  l.out_open = false;
  error_code ignored;
  l.out->close(ignored);
}

void AgentLinks::read_frames(size_t index) {
  Link& link = *links_[index];
  link.out->async_read_some(asio::buffer(link.out_buffer), [this, index](error_code ec, size_t n) {
    Link& l = *links_[index];
    if (n > 0 && !feed_frames(index, l.out_buffer.data(), n))
      ec = boost::asio::error::invalid_argument;
    if (ec || n == 0) {
      if (!l.out_open) return;
      close_frames(index);
      if (l.agent.exited) on_link_end(index);
      events_.progress();
      return;
    }
    read_frames(index);
  });
}

void AgentLinks::close_shell_err(size_t index) {
  Link& l = *links_[index];
  if (!l.err_open) return;
  l.err_open = false;
  error_code ignored;
  l.err->close(ignored);
}

void AgentLinks::read_shell_err(size_t index) {
  Link& link = *links_[index];
  link.err->async_read_some(asio::buffer(link.err_buffer), [this, index](error_code ec, size_t n) {
    Link& l = *links_[index];
    if (n > 0) {
      l.agent.err_text.append(l.err_buffer.data(), n);
      if (l.agent.err_text.size() > kShellErrKept)
        l.agent.err_text.erase(0, l.agent.err_text.size() - kShellErrKept);
      if (verbose_) {
        l.err_line.append(l.err_buffer.data(), n);
        for (size_t nl; (nl = l.err_line.find('\n')) != std::string::npos;) {
          events_.say(l.agent.host + " (" + l.agent.program + "): " + l.err_line.substr(0, nl));
          l.err_line.erase(0, nl + 1);
        }
      }
    }
    if (ec || n == 0) {
      if (!l.err_open) return;
      close_shell_err(index);
      if (l.agent.exited) on_link_end(index);
      events_.progress();
      return;
    }
    read_shell_err(index);
  });
}

void AgentLinks::on_frame(size_t index, const Frame& f) {
  Link& link = *links_[index];
  if (f.type == "PROCESS" || f.type == "PROCESSES_DONE") {
    if (replies_) replies_(link.agent.host, f);
    return;
  }
  if (!link.started) {
    if (apply_prestart_frame(link.agent, f)) link.hooks.progress();
    return;
  }
  if (f.type == "OUT") {
    long long rank = f.int_arg(0), stream = f.int_arg(1);
    if (record(rank) != nullptr)
      output_.write(static_cast<int>(rank), static_cast<int>(stream), f.payload);
  } else if (f.type == "STARTED") {
    if (WorkerRecord* w = record(f.int_arg(0))) w->pid = static_cast<pid_t>(f.int_arg(1));
  } else if (f.type == "START_FAILED") {
    long long rank = f.int_arg(0);
    events_.start_failed(JobEnd{JobEndKind::kStartFailed, static_cast<int>(rank), 2, 0,
                                "rank " + std::to_string(rank) + " on " + link.agent.host +
                                    " could not be started: " + f.payload});
  } else if (f.type == "EXIT") {
    on_worker_exit(static_cast<int>(f.int_arg(0)), static_cast<int>(f.int_arg(1, 0)));
  } else if (f.type == "DYING") {
    WorkerRecord* w = record(static_cast<int>(f.int_arg(0)));
    if (w != nullptr && !w->exited) events_.rank_dying(*w, static_cast<int>(f.int_arg(1, 0)));
  } else if (f.type == "NOTE") {
    events_.say(link.agent.host + ": " + f.payload);
  } else if (f.type == "BYE") {
    link.bye = true;
  }
}

void AgentLinks::on_worker_exit(int rank, int wait_status) {
  WorkerRecord* w = record(rank);
  if (w == nullptr) return;
  w->exited = true;
  w->wait_status = wait_status;
  events_.exit_recorded(*w);
  if (is_failure(wait_status)) events_.rank_failed(*w);
}

WorkerRecord* AgentLinks::reap() {
  for (size_t i = 0; i < links_.size(); ++i) {
    AgentLink& a = links_[i]->agent;
    if (a.exited || a.pid <= 0) continue;
    if (!reap_if_exited(a.pid, &a.wait_status)) continue;
    a.exited = true;
    on_link_exit(i);
  }
  return nullptr;
}

void AgentLinks::on_link_exit(size_t index) {
  Link& link = *links_[index];
  if (!link.out_open && !link.err_open) {
    on_link_end(index);
    return;
  }
  link.eof_wait = std::make_unique<asio::steady_timer>(io_, kOutputDrainLimit);
  link.eof_wait->async_wait([this, index](error_code ec) {
    if (ec) return;
    close_frames(index);
    close_shell_err(index);
    on_link_end(index);
    events_.progress();
  });
}

void AgentLinks::on_link_end(size_t index) {
  Link& link = *links_[index];
  // Judged on everything it said: its frames and its remote shell's last words.
  if (link.judged || link.out_open || link.err_open) return;
  link.judged = true;
  if (link.eof_wait) link.eof_wait->cancel();
  if (!link.started) {
    on_prestart_end(index);
    return;
  }
  if (link.bye) return;
  // The agent is gone before saying BYE: its workers were killed by it (or by their
  // PR_SET_PDEATHSIG); nobody can tell how each ended.
  for (size_t r = 0; r < records_.size() && r < link_of_rank_.size(); ++r)
    if (link_of_rank_[r] == index && !records_[r].exited)
      records_[r].lost = "lost with the agent on " + link.agent.host;
  std::string said;
  std::istringstream lines(link.agent.err_text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) said += (said.empty() ? "" : " / ") + line;
  events_.child_lost(JobEnd{JobEndKind::kControlPlane, -1, 1, 0,
                            "lost the agent on host " + link.agent.host + " (" +
                                link.agent.program + " " +
                                describe_wait_status(link.agent.wait_status) +
                                (said.empty() ? "" : ": " + said) + ")"});
}

void AgentLinks::on_prestart_end(size_t index) {
  Link& link = *links_[index];
  if (link.agent.failure.empty()) link.agent.failure = link.hooks.describe_exit(link.agent);
  link.hooks.progress();
}

bool AgentLinks::awaits_explanation(const JobEnd&) const { return true; }

void AgentLinks::signal_all(int sig) {
  held_ = false;
  if (!job_started_) {  // no worker runs yet: nothing to give a grace period to
    abandon();
    return;
  }
  send_all(encode_frame("SIGNAL", {std::to_string(sig)}));
  for (WorkerRecord& w : records_)
    if (w.pid > 0 && !w.exited) w.signalled_by_hvrun = true;
}

void AgentLinks::grace_over() {
  send_all(encode_frame("KILL"));
  shell_timer_.expires_after(kShellKillAfterGrace);
  shell_timer_.async_wait([this](error_code ec) {
    if (ec) return;
    // Agents that did not finish: cut their connection; they kill their workers on EOF.
    for (auto& link : links_)
      if (!link->agent.exited && link->agent.pid > 0) ::kill(-link->agent.pid, SIGKILL);
  });
}

void AgentLinks::kill_now(int sig) {
  events_.say("received " + signal_name(sig) + " again: killing every rank now");
  send_all(encode_frame("KILL"));
}

void AgentLinks::send_all(const std::string& frame) {
  for (auto& link : links_)
    if (!link->agent.exited) link->agent.send(frame);
}

bool AgentLinks::running() const {
  if (held_) return true;
  for (const auto& link : links_)
    if (!link->agent.exited) return true;
  return false;
}

bool AgentLinks::settle_leftovers(bool) {
  // What the workers left behind is each agent's to kill; only the shell timer is left here.
  shell_timer_.cancel();
  return true;
}

bool AgentLinks::output_open() const {
  for (const auto& link : links_)
    if (link->out_open || link->err_open) return true;
  return false;
}

void AgentLinks::close_output() {
  if (closed_) return;
  // Links still waiting for their streams' end are weighed on what they said.
  for (size_t i = 0; i < links_.size(); ++i)
    if (links_[i]->agent.exited) {
      close_frames(i);
      close_shell_err(i);
      on_link_end(i);
    }
  if (closed_) return;
  closed_ = true;
  for (auto& link : links_) {
    error_code ignored;
    if (link->out_open) link->out->close(ignored);
    if (link->err_open) link->err->close(ignored);
    link->out_open = link->err_open = false;
    if (link->eof_wait) link->eof_wait->cancel();
  }
  for (const WorkerRecord& w : records_) {
    output_.end(w.rank, 1);
    output_.end(w.rank, 2);
  }
}

}  // namespace hvrun::launcher
