#include "launcher/supervisor/job_supervisor.h"

#include <signal.h>

#include <sstream>

#include <boost/asio/post.hpp>

namespace hvrun::launcher {

namespace asio = boost::asio;
using boost::system::error_code;

JobSupervisor::JobSupervisor(SupervisorConfig config, OutputSink& err)
    : config_(std::move(config)),
      err_(err),
      loop_(io_, {SIGINT, SIGTERM},
            SupervisorLoop::Hooks{
                [this](int sig) { on_stop_signal(sig); },
                [this] {
                  if (WorkerRecord* failed = children_->reap()) decide(worker_failure(*failed));
                },
                [this] { return tearing_down_; },
                [this] { grace_timer_.cancel(); },
                [this] {
                  explain_timer_.cancel();
                  autopsy_signal_.cancel();
                }}),
      grace_timer_(io_),
      explain_timer_(io_),
      autopsy_signal_(io_, SIGUSR1) {
  wait_autopsy_signal();
}

void JobSupervisor::wait_autopsy_signal() {
  autopsy_signal_.async_wait([this](error_code ec, int) {
    if (ec) return;
    if (tearing_down_) {
      say("SIGUSR1: the job is ending; no autopsy");
    } else if (!config_.coordinator.request_autopsy) {
      say("SIGUSR1: this job has no coordinator to ask for an autopsy");
    } else if (!config_.coordinator.request_autopsy("SIGUSR1 to hvrun")) {
      say("SIGUSR1: no autopsy (one is under way, or the ranks have not all registered)");
    }
    wait_autopsy_signal();
  });
}

int JobSupervisor::run(Children& children, const std::function<void()>& start) {
  children_ = &children;
  loop_.start(children);
  start();
  // A child may have exited before SIGCHLD was being watched.
  if (WorkerRecord* failed = children.reap()) decide(worker_failure(*failed));
  loop_.check_progress();
  io_.run();

  // Everyone exited while a verdict still waited for its explanation: the verdict stands.
  if (!end_ && first_seen_)
    end_ = cause_of(*first_seen_);
  if (end_) {
    if (!told_) print_summary(err_, *end_, ranks());
  } else if (config_.verbose) {
    say(children_are_ranks() ? "all " + std::to_string(workers_.size()) + " ranks exited 0"
                                   : workers_.at(0).label + " exited 0");
  }
  return end_ ? end_->exit_code : 0;
}

void JobSupervisor::end_before_start(int exit_code, std::string message) {
  if (tearing_down_) return;
  explain_timer_.cancel();
  tearing_down_ = true;
  told_ = true;
  end_ = JobEnd{JobEndKind::kStartFailed, -1, exit_code, 0, std::move(message)};
  loop_.check_progress();
}

JobEnd JobSupervisor::cause_of(const JobEnd& seen) const {
  JobEnd end = first_cause(seen, config_.coordinator.read_verdict(), ranks());
  // Under mpirun the coordinator names the rank, and hvrun exits with mpirun's code.
  if (!children_are_ranks() && end.kind == JobEndKind::kControlPlane && !workers_.empty() &&
      workers_[0].exited && is_failure(workers_[0].wait_status)) {
    const JobEnd launcher = worker_failure(workers_[0]);
    end.exit_code = launcher.exit_code;
    end.message += " (" + launcher.message + ")";
  }
  return end;
}

const std::vector<WorkerRecord>& JobSupervisor::ranks() const {
  static const std::vector<WorkerRecord> kNone;
  return children_are_ranks() ? workers_ : kNone;
}

void JobSupervisor::post_control_plane_failure(std::string message, int rank) {
  asio::post(io_, [this, message = std::move(message), rank] {
    decide(JobEnd{JobEndKind::kControlPlane, rank, 1, 0, message});
  });
}

void JobSupervisor::post_note(std::string message) {
  asio::post(io_, [this, message = std::move(message)] {
    if (config_.verbose) say(message);
  });
}

void JobSupervisor::post_task(std::function<void()> task) { asio::post(io_, std::move(task)); }

void JobSupervisor::exit_recorded(const WorkerRecord& record) {
  if (config_.coordinator.worker_exited)
    config_.coordinator.worker_exited(record.rank, describe_wait_status(record.wait_status));
}

void JobSupervisor::rank_failed(const WorkerRecord& record) { decide(worker_failure(record)); }

void JobSupervisor::start_failed(JobEnd end) { begin_teardown(std::move(end), SIGTERM); }

void JobSupervisor::child_lost(JobEnd end) {
  // Elastic jobs go on without a lost host's ranks (their records say they were lost).
  if (!tearing_down_ && config_.absorb_failure && config_.absorb_failure(end)) {
    loop_.check_progress();
    return;
  }
  begin_teardown(std::move(end), SIGTERM);
}

void JobSupervisor::rank_dying(WorkerRecord& record, int wait_status) {
  // Only a job that goes on without a lost rank gains by acting before the exit can be read;
  // any other job ends on the exit's own account, a moment later.
  if (tearing_down_ || !config_.absorb_failure || record.exited || record.dying_status >= 0) return;
  record.dying_status = wait_status;
  WorkerRecord dying = record;
  dying.wait_status = wait_status;
  JobEnd end = worker_failure(dying);
  if (config_.absorb_failure(end)) {
    loop_.check_progress();
    return;
  }
  begin_teardown(std::move(end), SIGTERM);
}

void JobSupervisor::say(const std::string& text) { err_.write_message("hvrun: " + text + "\n"); }

void JobSupervisor::progress() { loop_.check_progress(); }

void JobSupervisor::on_stop_signal(int sig) {
  if (!tearing_down_) {
    begin_teardown(
        JobEnd{JobEndKind::kSignal, -1, 128 + sig, sig, "hvrun received " + signal_name(sig)},
        sig);
    return;
  }
  children_->kill_now(sig);
  loop_.check_progress();
}

void JobSupervisor::decide(JobEnd seen) {
  if (tearing_down_) return;
  if (seen.kind == JobEndKind::kWorkerFailed && config_.absorb_failure &&
      config_.absorb_failure(seen)) {
    loop_.check_progress();
    return;
  }
  // Exits waiting to be read are the better account of a control-plane failure (a crash the
  // coordinator saw as a lost stream, for instance), and a child found lost explains
  // everything (it begins the teardown itself).
  WorkerRecord* failed = children_->reap();
  if (tearing_down_) return;
  if (failed != nullptr && seen.kind == JobEndKind::kControlPlane) seen = worker_failure(*failed);
  if (!first_seen_) first_seen_ = seen;
  JobEnd end = cause_of(*first_seen_);
  // mpirun ends when one of its ranks fails: the coordinator, which saw that rank's stream drop,
  // is about to say which one.
  const bool launcher_failed = !children_are_ranks() && end.kind == JobEndKind::kWorkerFailed;
  if (!explained_ && (launcher_failed || children_->awaits_explanation(end))) {
    if (!explaining_) {
      explaining_ = true;
      explain_timer_.expires_after(kExplainDelay);
      explain_timer_.async_wait([this](error_code ec) {
        if (ec) return;
        explained_ = true;
        decide(*first_seen_);
      });
    }
    return;
  }
  begin_teardown(end, SIGTERM);
}

void JobSupervisor::begin_teardown(JobEnd end, int sig) {
  if (tearing_down_) return;
  explain_timer_.cancel();
  tearing_down_ = true;
  end_ = end;
  std::ostringstream grace;
  grace << std::chrono::duration<double>(config_.grace_period).count();
  if (workers_.empty())  // the job ended before any rank was placed (a multi-host pre-flight)
    say(end.message + "; stopping the job (no rank was started)");
  else
    say(end.message + "; stopping the job (" + signal_name(sig) + " to every rank, SIGKILL after " +
        grace.str() + " s)");
  if (config_.coordinator.abort) {
    std::string host = end.rank >= 0 && static_cast<size_t>(end.rank) < ranks().size()
                           ? ranks()[static_cast<size_t>(end.rank)].host
                           : "";
    config_.coordinator.abort(end.message, end.rank, host);
  }
  children_->signal_all(sig);
  grace_timer_.expires_after(config_.grace_period);
  grace_timer_.async_wait([this](error_code ec) {
    if (ec) return;
    children_->grace_over();
    loop_.check_progress();
  });
  loop_.check_progress();
}

}  // namespace hvrun::launcher
