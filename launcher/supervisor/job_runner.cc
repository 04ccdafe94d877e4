#include "launcher/supervisor/job_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "launcher/supervisor/job_summary.h"
#include "launcher/process/process_group.h"
#include "launcher/plan/cpu_binding.h"
#include "launcher/process/worker_process.h"

namespace hvrun::launcher {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

constexpr size_t kStderrLinesKept = 10;
// After every worker exited, how long output still held open by leftovers may take to drain.
constexpr std::chrono::milliseconds kDrainLimit{1000};
// While waiting for process groups to empty during a teardown (they cannot be waited on).
constexpr std::chrono::milliseconds kGroupPoll{20};
// How long a rank the coordinator reports lost may take to show its own exit status.
constexpr std::chrono::milliseconds kExitExplainsLoss{300};

}  // namespace

class JobRunner::Impl {
 public:
  Impl(JobRunnerConfig config, OutputSink& out, OutputSink& err, OrphanGuard* guard)
      : config_(std::move(config)), out_(out), err_(err), guard_(guard),
        job_signals_(io_, SIGINT, SIGTERM), child_signal_(io_, SIGCHLD), grace_timer_(io_),
        poll_timer_(io_), drain_timer_(io_), explain_timer_(io_) {}

  std::optional<JobEnd> end() const { return end_; }
  int run(const std::vector<WorkerLaunch>& launches);

  void post_control_plane_failure(std::string message, int rank) {
    asio::post(io_, [this, message = std::move(message), rank] {
      decide(JobEnd{JobEndKind::kControlPlane, rank, 1, 0, message});
    });
  }

  void post_note(std::string message) {
    asio::post(io_, [this, message = std::move(message)] {
      if (config_.verbose) err_.write_message("hvrun: " + message + "\n");
    });
  }

 private:
  struct Pipe {
    std::unique_ptr<asio::posix::stream_descriptor> fd;
    std::unique_ptr<TaggedStream> stream;
    std::array<char, 65536> buffer{};
    bool open = false;
  };

  void say(const std::string& text) { err_.write_message("hvrun: " + text + "\n"); }

  Status start_worker(WorkerRecord& record, const WorkerLaunch& launch);
  int open_copy_file(int rank, const char* which);
  void read_more(Pipe& pipe);
  void wait_signals();
  void wait_children();
  void reap_all();
  WorkerRecord* collect_exits();
  void decide(JobEnd seen);
  void begin_teardown(JobEnd end, int sig);
  void signal_all(int sig);
  void check_progress();
  void close_pipes();
  int exit_code() const;

  JobRunnerConfig config_;
  OutputSink& out_;
  OutputSink& err_;
  OrphanGuard* guard_;
  asio::io_context io_;
  asio::signal_set job_signals_;
  asio::signal_set child_signal_;
  asio::steady_timer grace_timer_;
  asio::steady_timer poll_timer_;
  asio::steady_timer drain_timer_;
  asio::steady_timer explain_timer_;  // a verdict waiting for the exit of the rank it names

  std::vector<WorkerRecord> workers_;
  std::vector<std::unique_ptr<Pipe>> pipes_;  // two per started worker: stdout, stderr
  bool tearing_down_ = false;
  bool killed_ = false;             // SIGKILL was sent to every group
  bool leftovers_handled_ = false;  // every worker exited; their groups were dealt with
  bool polling_ = false;
  std::optional<JobEnd> first_seen_;  // the first failure seen, while the cause is settled
  bool explaining_ = false;           // explain_timer_ runs
  bool explained_ = false;            // explain_timer_ ran out: decide with what is known
  std::optional<JobEnd> end_;
};

int JobRunner::Impl::run(const std::vector<WorkerLaunch>& launches) {
  wait_signals();
  wait_children();

  if (!config_.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(config_.output_dir, ec);
    if (ec) {
      say("cannot create the --output-filename directory " + config_.output_dir + ": " +
          ec.message());
      return 2;
    }
  }

  // Sized once: pipe callbacks and the summary hold references into it.
  workers_.resize(launches.size());
  for (size_t i = 0; i < launches.size(); ++i) {
    WorkerRecord& record = workers_[i];
    record.rank = launches[i].rank;
    record.host = launches[i].host;
    Status started = start_worker(record, launches[i]);
    if (!started.is_ok()) {
      JobEnd end{JobEndKind::kStartFailed, record.rank, 2, 0,
                 "rank " + std::to_string(record.rank) + " could not be started: " +
                     started.message()};
      begin_teardown(end, SIGTERM);
      break;
    }
  }
  spdlog::debug("{} workers started", workers_.size());
  reap_all();  // a worker may have exited before SIGCHLD was being watched
  check_progress();
  io_.run();

  // Everyone exited while a verdict still waited for its rank: the verdict stands.
  if (!end_ && first_seen_)
    end_ = first_cause(*first_seen_, config_.coordinator.read_verdict(), workers_);
  if (end_) print_summary(err_, *end_, workers_);
  else if (config_.verbose) say("all " + std::to_string(workers_.size()) + " ranks exited 0");
  return exit_code();
}

Status JobRunner::Impl::start_worker(WorkerRecord& record, const WorkerLaunch& launch) {
  const std::vector<int> cpus = binding_for_worker(launch.envp);
  HVRUN_ASSIGN_OR_RETURN(SpawnedWorker spawned, spawn_worker(config_.command_path, config_.argv,
                                                             launch.envp, false, cpus));
  if (!cpus.empty())
    spdlog::debug("rank {} bound to CPUs {}", record.rank, cpu_list_text(cpus));
  record.pid = spawned.pid;
  if (guard_ != nullptr) guard_->watch(spawned.pid);

  const std::string rank = std::to_string(record.rank);
  int fds[2] = {spawned.stdout_fd, spawned.stderr_fd};
  const char* names[2] = {"stdout", "stderr"};
  for (int k = 0; k < 2; ++k) {
    auto pipe = std::make_unique<Pipe>();
    std::string tag = config_.tag_output ? "[" + rank + "]<" + names[k] + ">:" : "";
    pipe->stream = std::make_unique<TaggedStream>(tag, k == 0 ? out_ : err_,
                                                  open_copy_file(record.rank, names[k]),
                                                  k == 1 ? kStderrLinesKept : 0);
    pipe->fd = std::make_unique<asio::posix::stream_descriptor>(io_, fds[k]);
    pipe->open = true;
    pipes_.push_back(std::move(pipe));
    if (k == 1) record.err_stream = pipes_.back()->stream.get();
    read_more(*pipes_.back());
  }
  return Status::ok();
}

int JobRunner::Impl::open_copy_file(int rank, const char* which) {
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

void JobRunner::Impl::read_more(Pipe& pipe) {
  pipe.fd->async_read_some(asio::buffer(pipe.buffer), [this, &pipe](error_code ec, size_t n) {
    if (n > 0) pipe.stream->feed(std::string_view(pipe.buffer.data(), n));
    if (ec || n == 0) {
      if (!pipe.open) return;  // closed by close_pipes()
      pipe.stream->finish();
      pipe.open = false;
      error_code ignored;
      pipe.fd->close(ignored);
      check_progress();
      return;
    }
    read_more(pipe);
  });
}

void JobRunner::Impl::wait_signals() {
  job_signals_.async_wait([this](error_code ec, int sig) {
    if (ec) return;
    if (!tearing_down_) {
      begin_teardown(JobEnd{JobEndKind::kSignal, -1, 128 + sig, sig,
                            "hvrun received " + signal_name(sig)},
                     sig);
    } else if (!killed_) {
      say("received " + signal_name(sig) + " again: sending SIGKILL to every rank now");
      signal_all(SIGKILL);
      killed_ = true;
      check_progress();
    }
    wait_signals();
  });
}

void JobRunner::Impl::wait_children() {
  child_signal_.async_wait([this](error_code ec, int) {
    if (ec) return;
    reap_all();
    check_progress();
    wait_children();
  });
}

void JobRunner::Impl::reap_all() {
  if (WorkerRecord* failed = collect_exits()) decide(worker_failure(*failed));
}

// Records every exit waiting to be read; returns the first failed one (lowest rank: exits read
// together cannot be ordered), or null.
WorkerRecord* JobRunner::Impl::collect_exits() {
  WorkerRecord* first_failed = nullptr;
  for (WorkerRecord& record : workers_) {
    if (record.pid <= 0 || record.exited) continue;
    int status = 0;
    pid_t got;
    do {
      got = ::waitpid(record.pid, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got != record.pid) continue;
    spdlog::debug("rank {} (pid {}) {}", record.rank, record.pid, describe_wait_status(status));
    record.exited = true;
    record.wait_status = status;
    if (config_.coordinator.worker_exited)
      config_.coordinator.worker_exited(record.rank, describe_wait_status(status));
    if (is_failure(status) && first_failed == nullptr) first_failed = &record;
  }
  return first_failed;
}

void JobRunner::Impl::decide(JobEnd seen) {
  if (tearing_down_) return;
  // A worker that already died is the better account of a control-plane failure (a crash the
  // coordinator saw as a lost stream, for instance): collect the exits waiting to be read.
  if (WorkerRecord* failed = collect_exits(); failed && seen.kind == JobEndKind::kControlPlane)
    seen = worker_failure(*failed);
  if (!first_seen_) first_seen_ = seen;
  JobEnd end = first_cause(*first_seen_, config_.coordinator.read_verdict(), workers_);
  if (awaits_named_rank(end, workers_) && !explained_) {
    // A dying process closes its sockets before it can be reaped: the coordinator may name a
    // lost rank a moment before its exit status exists. Give that exit a moment to arrive.
    if (!explaining_) {
      explaining_ = true;
      explain_timer_.expires_after(kExitExplainsLoss);
      explain_timer_.async_wait([this](error_code ec) {
        if (ec) return;
        explained_ = true;
        decide(*first_seen_);
      });
    }
    return;
  }
  explain_timer_.cancel();
  begin_teardown(end, SIGTERM);
}

void JobRunner::Impl::begin_teardown(JobEnd end, int sig) {
  if (tearing_down_) return;
  tearing_down_ = true;
  end_ = end;
  std::ostringstream grace;
  grace << std::chrono::duration<double>(config_.grace_period).count();
  say(end.message + "; stopping the job (" + signal_name(sig) + " to every rank, SIGKILL after " +
      grace.str() + " s)");
  if (config_.coordinator.abort) {
    std::string host = end.rank >= 0 && static_cast<size_t>(end.rank) < workers_.size()
                           ? workers_[static_cast<size_t>(end.rank)].host
                           : "";
    config_.coordinator.abort(end.message, end.rank, host);
  }
  signal_all(sig);
  grace_timer_.expires_after(config_.grace_period);
  grace_timer_.async_wait([this](error_code ec) {
    if (ec || killed_) return;
    bool anyone = false;
    for (const WorkerRecord& r : workers_) anyone |= r.pid > 0 && group_has_live_members(r.pid);
    if (anyone) say("grace period over: sending SIGKILL to the ranks still running");
    signal_all(SIGKILL);
    killed_ = true;
    check_progress();
  });
  check_progress();
}

void JobRunner::Impl::signal_all(int sig) {
  for (WorkerRecord& record : workers_) {
    if (record.pid <= 0) continue;
    // The whole process group: the worker and whatever it started. A group whose members are
    // all gone answers ESRCH, which is fine.
    if (signal_group(record.pid, sig) && !record.exited) record.signalled_by_hvrun = true;
  }
}

void JobRunner::Impl::check_progress() {
  for (const WorkerRecord& r : workers_)
    if (r.pid > 0 && !r.exited) return;

  if (!leftovers_handled_) {
    bool leftovers = false;
    for (const WorkerRecord& r : workers_) leftovers |= r.pid > 0 && group_has_live_members(r.pid);
    if (leftovers && tearing_down_ && !killed_) {
      // Still inside the grace period: give what the workers started time to stop.
      if (!polling_) {
        polling_ = true;
        poll_timer_.expires_after(kGroupPoll);
        poll_timer_.async_wait([this](error_code ec) {
          polling_ = false;
          if (!ec) check_progress();
        });
      }
      return;
    }
    if (leftovers) {
      // Every worker exited but left processes behind; they would be orphans.
      signal_all(SIGKILL);
      killed_ = true;
    }
    leftovers_handled_ = true;
    grace_timer_.cancel();
    poll_timer_.cancel();
    drain_timer_.expires_after(kDrainLimit);
    drain_timer_.async_wait([this](error_code ec) {
      if (!ec) close_pipes();
    });
  }
  for (const auto& pipe : pipes_)
    if (pipe->open) return;
  spdlog::debug("every worker exited and its output is drained");
  drain_timer_.cancel();
  job_signals_.cancel();
  child_signal_.cancel();
  io_.stop();
}

void JobRunner::Impl::close_pipes() {
  for (auto& pipe : pipes_) {
    if (!pipe->open) continue;
    pipe->open = false;
    pipe->stream->finish();
    error_code ignored;
    pipe->fd->close(ignored);
  }
  check_progress();
}

int JobRunner::Impl::exit_code() const { return end_ ? end_->exit_code : 0; }

JobRunner::JobRunner(JobRunnerConfig config, OutputSink& out, OutputSink& err, OrphanGuard* guard)
    : impl_(std::make_unique<Impl>(std::move(config), out, err, guard)) {}
JobRunner::~JobRunner() = default;
int JobRunner::run(const std::vector<WorkerLaunch>& workers) { return impl_->run(workers); }
std::optional<JobEnd> JobRunner::end() const { return impl_->end(); }
void JobRunner::post_control_plane_failure(std::string message, int rank) {
  impl_->post_control_plane_failure(std::move(message), rank);
}
void JobRunner::post_note(std::string message) { impl_->post_note(std::move(message)); }

}  // namespace hvrun::launcher
