#include "launcher/remote/multi_host_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "launcher/supervisor/job_summary.h"

namespace hvrun::launcher {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr size_t kStderrLinesKept = 10;
constexpr std::chrono::milliseconds kShellKillAfterGrace{5000};
constexpr std::chrono::milliseconds kDrainLimit{1000};
constexpr size_t kShellErrKept = 4096;
constexpr std::chrono::milliseconds kExplainDelay{300};
}  // namespace

class MultiHostRunner::Impl {
 public:
  Impl(MultiHostRunnerConfig config, OutputSink& out, OutputSink& err)
      : config_(std::move(config)),
        out_(out),
        err_(err),
        job_signals_(io_, SIGINT, SIGTERM),
        child_signal_(io_, SIGCHLD),
        grace_timer_(io_),
        shell_timer_(io_),
        drain_timer_(io_),
        explain_timer_(io_) {}

  std::optional<JobEnd> end() const { return end_; }
  int run(std::vector<AgentLink> links, const std::vector<RemoteRank>& ranks);

  void post_control_plane_failure(std::string message, int rank) {
    asio::post(io_, [this, message = std::move(message), rank] {
      defer_failure(JobEnd{JobEndKind::kControlPlane, rank, 1, 0, message});
    });
  }
  void post_note(std::string message) {
    asio::post(io_, [this, message = std::move(message)] {
      if (config_.verbose) say(message);
    });
  }

 private:
  struct Link {
    AgentLink agent;
    std::unique_ptr<asio::posix::stream_descriptor> out, err;
    std::array<char, 65536> out_buffer{}, err_buffer{};
    bool out_open = false, err_open = false;
    bool bye = false;
    bool judged = false;  // its end has been weighed (on_link_end)
    std::unique_ptr<asio::steady_timer> eof_wait;
    std::string err_line;  // partial stderr line of the remote shell
  };

  void say(const std::string& text) { err_.write_message("hvrun: " + text + "\n"); }
  int open_copy_file(int rank, const char* which);
  void read_frames(size_t index);
  // Feeds `n` bytes of a link's frame stream to its reader and acts on each whole frame; false
  // when the stream is malformed (said).
  bool feed_frames(size_t index, const char* data, size_t n);
  void close_frames(size_t index);
  void read_shell_err(size_t index);
  void on_frame(size_t index, const Frame& f);
  void wait_signals();
  void wait_children();
  void reap_links();
  // The remote shell was reaped. Its last frames (its agent's BYE among them) may still be in
  // the pipe, or read but not yet handled: the link is weighed once its frame stream ends, or
  // kDrainLimit later if something else still holds the pipe open.
  void on_link_exit(size_t index);
  void on_link_end(size_t index);
  void on_worker_exit(int rank, int wait_status);
  // The first failure of a rank or of the control plane ends the job kExplainDelay later,
  // unless an agent is found lost meanwhile: a lost agent explains everything else (the
  // coordinator sees the host's workers' streams drop, and the other ranks fail on the abort,
  // before hvrun sees the remote shell end). Later failures only record their exits.
  void defer_failure(JobEnd end);
  void begin_teardown(JobEnd end, int sig);
  void send_all(const std::string& frame);
  void check_progress();
  void close_all();
  WorkerRecord* record(long long rank) {
    if (rank < 0 || static_cast<size_t>(rank) >= workers_.size()) return nullptr;
    return &workers_[static_cast<size_t>(rank)];
  }

  MultiHostRunnerConfig config_;
  OutputSink& out_;
  OutputSink& err_;
  asio::io_context io_;
  asio::signal_set job_signals_;
  asio::signal_set child_signal_;
  asio::steady_timer grace_timer_, shell_timer_, drain_timer_, explain_timer_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<WorkerRecord> workers_;
  std::vector<size_t> link_of_rank_;
  std::vector<std::array<std::unique_ptr<TaggedStream>, 2>> streams_;
  bool tearing_down_ = false;
  bool draining_ = false;
  bool closed_ = false;
  std::optional<JobEnd> end_;
  std::optional<JobEnd> pending_;  // the first failure, waiting kExplainDelay
};

int MultiHostRunner::Impl::run(std::vector<AgentLink> links, const std::vector<RemoteRank>& ranks) {
  wait_signals();
  wait_children();
  if (!config_.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config_.output_dir, ec);
  }
  workers_.resize(ranks.size());
  streams_.resize(ranks.size());
  link_of_rank_.resize(ranks.size());
  for (const RemoteRank& r : ranks) {
    WorkerRecord& w = workers_.at(static_cast<size_t>(r.rank));
    w.rank = r.rank;
    w.host = r.host;
    link_of_rank_[static_cast<size_t>(r.rank)] = r.link;
    const char* names[2] = {"stdout", "stderr"};
    for (int k = 0; k < 2; ++k) {
      std::string tag =
          config_.tag_output ? "[" + std::to_string(r.rank) + "]<" + names[k] + ">:" : "";
      streams_[static_cast<size_t>(r.rank)][static_cast<size_t>(k)] =
          std::make_unique<TaggedStream>(tag, k == 0 ? out_ : err_,
                                         open_copy_file(r.rank, names[k]),
                                         k == 1 ? kStderrLinesKept : 0);
    }
    w.err_stream = streams_[static_cast<size_t>(r.rank)][1].get();
  }
  for (AgentLink& agent : links) {
    auto link = std::make_unique<Link>();
    link->agent = std::move(agent);
    link->out = std::make_unique<asio::posix::stream_descriptor>(io_, link->agent.out_fd);
    link->out_open = true;
    if (link->agent.err_fd >= 0) {
      link->err = std::make_unique<asio::posix::stream_descriptor>(io_, link->agent.err_fd);
      link->err_open = true;
    }
    links_.push_back(std::move(link));
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    // Frames that arrived with the last pre-start read are already in the reader.
    while (true) {
      auto frame = links_[i]->agent.reader.next();
      if (!frame.is_ok() || !frame->has_value()) break;
      on_frame(i, **frame);
    }
    read_frames(i);
    if (links_[i]->err_open) read_shell_err(i);
  }
  reap_links();
  check_progress();
  io_.run();

  for (auto& link : links_)
    if (link->agent.in_fd >= 0) ::close(link->agent.in_fd);
  // Everything ended within kExplainDelay.
  if (!end_ && pending_) end_ = first_cause(*pending_, config_.coordinator.read_verdict(), workers_);
  if (end_)
    print_summary(err_, *end_, workers_);
  else if (config_.verbose)
    say("all " + std::to_string(workers_.size()) + " ranks exited 0");
  return end_ ? end_->exit_code : 0;
}

int MultiHostRunner::Impl::open_copy_file(int rank, const char* which) {
  if (config_.output_dir.empty()) return -1;
  std::filesystem::path dir =
      std::filesystem::path(config_.output_dir) / ("rank." + std::to_string(rank));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = (dir / which).string();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) say("cannot write " + path + ": " + std::strerror(errno));
  return fd;
}

bool MultiHostRunner::Impl::feed_frames(size_t index, const char* data, size_t n) {
  Link& l = *links_[index];
  l.agent.reader.feed(std::string_view(data, n));
  while (true) {
    auto frame = l.agent.reader.next();
    if (!frame.is_ok()) {
      say("host " + l.agent.host + ": " + frame.status().message());
      return false;
    }
    if (!frame->has_value()) return true;
    on_frame(index, **frame);
  }
}

void MultiHostRunner::Impl::close_frames(size_t index) {
  Link& l = *links_[index];
  if (!l.out_open) return;
  l.out_open = false;
  error_code ignored;
  l.out->close(ignored);
}

void MultiHostRunner::Impl::read_frames(size_t index) {
  Link& link = *links_[index];
  link.out->async_read_some(asio::buffer(link.out_buffer), [this, index](error_code ec, size_t n) {
    Link& l = *links_[index];
    if (n > 0 && !feed_frames(index, l.out_buffer.data(), n))
      ec = boost::asio::error::invalid_argument;
    if (ec || n == 0) {
      if (!l.out_open) return;
      close_frames(index);
      if (l.agent.exited) on_link_end(index);
      check_progress();
      return;
    }
    read_frames(index);
  });
}

void MultiHostRunner::Impl::read_shell_err(size_t index) {
  Link& link = *links_[index];
  link.err->async_read_some(asio::buffer(link.err_buffer), [this, index](error_code ec, size_t n) {
    Link& l = *links_[index];
    if (n > 0) {
      l.agent.err_text.append(l.err_buffer.data(), n);
      if (l.agent.err_text.size() > kShellErrKept)
        l.agent.err_text.erase(0, l.agent.err_text.size() - kShellErrKept);
      if (config_.verbose) {
        l.err_line.append(l.err_buffer.data(), n);
        for (size_t nl; (nl = l.err_line.find('\n')) != std::string::npos;) {
          say(l.agent.host + " (" + l.agent.program + "): " + l.err_line.substr(0, nl));
          l.err_line.erase(0, nl + 1);
        }
      }
    }
    if (ec || n == 0) {
      if (!l.err_open) return;
      l.err_open = false;
      error_code ignored;
      l.err->close(ignored);
      check_progress();
      return;
    }
    read_shell_err(index);
  });
}

void MultiHostRunner::Impl::on_frame(size_t index, const Frame& f) {
  Link& link = *links_[index];
  if (f.type == "OUT") {
    long long rank = f.int_arg(0), stream = f.int_arg(1);
    if (record(rank) != nullptr && (stream == 1 || stream == 2))
      streams_[static_cast<size_t>(rank)][static_cast<size_t>(stream - 1)]->feed(f.payload);
  } else if (f.type == "STARTED") {
    if (WorkerRecord* w = record(f.int_arg(0))) w->pid = static_cast<pid_t>(f.int_arg(1));
  } else if (f.type == "START_FAILED") {
    long long rank = f.int_arg(0);
    if (!tearing_down_)
      begin_teardown(JobEnd{JobEndKind::kStartFailed, static_cast<int>(rank), 2, 0,
                            "rank " + std::to_string(rank) + " on " + link.agent.host +
                                " could not be started: " + f.payload},
                     SIGTERM);
  } else if (f.type == "EXIT") {
    on_worker_exit(static_cast<int>(f.int_arg(0)), static_cast<int>(f.int_arg(1, 0)));
  } else if (f.type == "NOTE") {
    say(link.agent.host + ": " + f.payload);
  } else if (f.type == "BYE") {
    link.bye = true;
  }
}

void MultiHostRunner::Impl::on_worker_exit(int rank, int wait_status) {
  WorkerRecord* w = record(rank);
  if (w == nullptr) return;
  w->exited = true;
  w->wait_status = wait_status;
  if (config_.coordinator.worker_exited)
    config_.coordinator.worker_exited(rank, describe_wait_status(wait_status));
  if (tearing_down_ || pending_ || !is_failure(wait_status))
    return;  // a success, or a consequence of the failure already being handled
  defer_failure(worker_failure(*w));
}

void MultiHostRunner::Impl::defer_failure(JobEnd end) {
  if (tearing_down_ || pending_) return;
  reap_links();  // an agent already gone is the better explanation
  if (tearing_down_) return;
  pending_ = std::move(end);
  explain_timer_.expires_after(kExplainDelay);
  explain_timer_.async_wait([this](error_code ec) {
    if (ec) return;
    reap_links();
    if (!tearing_down_ && pending_)
      begin_teardown(first_cause(*pending_, config_.coordinator.read_verdict(), workers_), SIGTERM);
  });
}

void MultiHostRunner::Impl::wait_signals() {
  job_signals_.async_wait([this](error_code ec, int sig) {
    if (ec) return;
    if (!tearing_down_) {
      begin_teardown(
          JobEnd{JobEndKind::kSignal, -1, 128 + sig, sig, "hvrun received " + signal_name(sig)},
          sig);
    } else {
      say("received " + signal_name(sig) + " again: killing every rank now");
      send_all(encode_frame("KILL"));
    }
    wait_signals();
  });
}

void MultiHostRunner::Impl::wait_children() {
  child_signal_.async_wait([this](error_code ec, int) {
    if (ec) return;
    reap_links();
    check_progress();
    wait_children();
  });
}

void MultiHostRunner::Impl::reap_links() {
  for (size_t i = 0; i < links_.size(); ++i) {
    AgentLink& a = links_[i]->agent;
    if (a.exited || a.pid <= 0) continue;
    int status = 0;
    pid_t got;
    do {
      got = ::waitpid(a.pid, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got != a.pid) continue;
    a.exited = true;
    a.wait_status = status;
    on_link_exit(i);
  }
}

void MultiHostRunner::Impl::on_link_exit(size_t index) {
  Link& link = *links_[index];
  if (!link.out_open) {
    on_link_end(index);
    return;
  }
  link.eof_wait = std::make_unique<asio::steady_timer>(io_, kDrainLimit);
  link.eof_wait->async_wait([this, index](error_code ec) {
    if (ec) return;
    close_frames(index);
    on_link_end(index);
    check_progress();
  });
}

void MultiHostRunner::Impl::on_link_end(size_t index) {
  Link& link = *links_[index];
  if (link.judged) return;
  link.judged = true;
  if (link.eof_wait) link.eof_wait->cancel();
  if (link.bye) return;
  // The agent is gone before saying BYE: its workers were killed by it (or by their
  // PR_SET_PDEATHSIG); nobody can tell how each ended.
  for (size_t r = 0; r < workers_.size(); ++r)
    if (link_of_rank_[r] == index && !workers_[r].exited)
      workers_[r].lost = "lost with the agent on " + link.agent.host;
  if (tearing_down_) return;
  std::string said;
  std::istringstream lines(link.agent.err_text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) said += (said.empty() ? "" : " / ") + line;
  begin_teardown(JobEnd{JobEndKind::kControlPlane, -1, 1, 0,
                        "lost the agent on host " + link.agent.host + " (" + link.agent.program +
                            " " + describe_wait_status(link.agent.wait_status) +
                            (said.empty() ? "" : ": " + said) + ")"},
                 SIGTERM);
}

void MultiHostRunner::Impl::begin_teardown(JobEnd end, int sig) {
  if (tearing_down_) return;
  explain_timer_.cancel();
  tearing_down_ = true;
  end_ = end;
  std::ostringstream grace;
  grace << std::chrono::duration<double>(config_.grace_period).count();
  say(end.message + "; stopping the job (" + signal_name(sig) + " to every rank, SIGKILL after " +
      grace.str() + " s)");
  if (config_.coordinator.abort) {
    std::string host =
        record(end.rank) != nullptr ? workers_[static_cast<size_t>(end.rank)].host : "";
    config_.coordinator.abort(end.message, end.rank, host);
  }
  send_all(encode_frame("SIGNAL", {std::to_string(sig)}));
  for (WorkerRecord& w : workers_)
    if (w.pid > 0 && !w.exited) w.signalled_by_hvrun = true;
  grace_timer_.expires_after(config_.grace_period);
  grace_timer_.async_wait([this](error_code ec) {
    if (ec) return;
    send_all(encode_frame("KILL"));
    shell_timer_.expires_after(kShellKillAfterGrace);
    shell_timer_.async_wait([this](error_code ec2) {
      if (ec2) return;
      // Agents that did not finish: cut their connection; they kill their workers on EOF.
      for (auto& link : links_)
        if (!link->agent.exited && link->agent.pid > 0) ::kill(-link->agent.pid, SIGKILL);
    });
  });
  check_progress();
}

void MultiHostRunner::Impl::send_all(const std::string& frame) {
  for (auto& link : links_)
    if (!link->agent.exited) link->agent.send(frame);
}

void MultiHostRunner::Impl::check_progress() {
  for (auto& link : links_)
    if (!link->agent.exited) return;
  if (!draining_) {
    draining_ = true;
    grace_timer_.cancel();
    shell_timer_.cancel();
    drain_timer_.expires_after(kDrainLimit);
    drain_timer_.async_wait([this](error_code ec) {
      if (!ec) close_all();
    });
  }
  for (auto& link : links_)
    if (link->out_open || link->err_open) return;
  close_all();
}

void MultiHostRunner::Impl::close_all() {
  if (closed_) return;
  // Links still waiting for their frame stream's end are weighed on what they said.
  for (size_t i = 0; i < links_.size(); ++i)
    if (links_[i]->agent.exited) on_link_end(i);
  if (closed_) return;
  closed_ = true;
  for (auto& link : links_) {
    error_code ignored;
    if (link->out_open) link->out->close(ignored);
    if (link->err_open) link->err->close(ignored);
    link->out_open = link->err_open = false;
  }
  for (auto& pair : streams_)
    for (auto& s : pair) s->finish();
  drain_timer_.cancel();
  explain_timer_.cancel();
  for (auto& link : links_)
    if (link->eof_wait) link->eof_wait->cancel();
  job_signals_.cancel();
  child_signal_.cancel();
  io_.stop();
}

MultiHostRunner::MultiHostRunner(MultiHostRunnerConfig config, OutputSink& out, OutputSink& err)
    : impl_(std::make_unique<Impl>(std::move(config), out, err)) {}
MultiHostRunner::~MultiHostRunner() = default;
int MultiHostRunner::run(std::vector<AgentLink> links, const std::vector<RemoteRank>& ranks) {
  return impl_->run(std::move(links), ranks);
}
std::optional<JobEnd> MultiHostRunner::end() const { return impl_->end(); }
void MultiHostRunner::post_control_plane_failure(std::string message, int rank) {
  impl_->post_control_plane_failure(std::move(message), rank);
}
void MultiHostRunner::post_note(std::string message) { impl_->post_note(std::move(message)); }

}  // namespace hvrun::launcher
