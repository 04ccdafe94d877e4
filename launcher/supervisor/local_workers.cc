#include "launcher/supervisor/local_workers.h"

#include <signal.h>

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include "launcher/process/process_group.h"
#include "launcher/process/worker_process.h"
#include "launcher/supervisor/job_verdict.h"

namespace hvrun::launcher {

namespace asio = boost::asio;
using boost::system::error_code;

LocalWorkers::LocalWorkers(asio::io_context& io, std::vector<WorkerRecord>& records,
                           RankOutput& output, ChildrenEvents& events, OrphanGuard* guard,
                           std::chrono::milliseconds grace_period)
    : io_(io), records_(records), output_(output), events_(events), guard_(guard),
      strays_(grace_period) {}

Status LocalWorkers::start(size_t index, const std::string& path,
                           const std::vector<std::string>& argv,
                           const std::vector<std::string>& envp, const std::vector<int>& cpus) {
  WorkerRecord& record = records_.at(index);
  std::vector<std::string> environment = envp;
  if (dying_) environment.push_back(dying_->environment_entry(index));
  HVRUN_ASSIGN_OR_RETURN(SpawnedWorker spawned, spawn_worker(path, argv, environment, false, cpus));
  record.pid = spawned.pid;
  if (guard_ != nullptr) guard_->watch(spawned.pid);
  if (dying_) {
    dying_->watch(index, spawned.pid, [this, index, self = std::weak_ptr<LocalWorkers*>(self_)](int status) {
      asio::post(io_, [self, index, status] {
        auto alive = self.lock();
        if (!alive) return;
        LocalWorkers& workers = **alive;
        WorkerRecord& dying = workers.records_[index];
        if (!dying.exited) workers.events_.rank_dying(dying, status);
      });
    });
  }
  output_.begin(record);
  const int fds[2] = {spawned.stdout_fd, spawned.stderr_fd};
  for (int k = 0; k < 2; ++k) {
    auto pipe = std::make_unique<Pipe>();
    pipe->index = index;
    pipe->stream = k + 1;
    pipe->fd = std::make_unique<asio::posix::stream_descriptor>(io_, fds[k]);
    pipe->open = true;
    pipes_.push_back(std::move(pipe));
    read_more(*pipes_.back());
  }
  return Status::ok();
}

void LocalWorkers::read_more(Pipe& pipe) {
  pipe.fd->async_read_some(asio::buffer(pipe.buffer), [this, &pipe](error_code ec, size_t n) {
    if (n > 0)
      output_.write(records_[pipe.index].rank, pipe.stream, std::string_view(pipe.buffer.data(), n));
    if (ec || n == 0) {
      if (!pipe.open) return;  // closed by close_output()
      close_pipe(pipe);
      events_.progress();
      return;
    }
    read_more(pipe);
  });
}

void LocalWorkers::close_pipe(Pipe& pipe) {
  pipe.open = false;
  output_.end(records_[pipe.index].rank, pipe.stream);
  error_code ignored;
  pipe.fd->close(ignored);
}

void LocalWorkers::watch_for_dying() {
  if (dying_) return;
  auto made = DyingWorkers::start(records_.capacity());
  if (!made.is_ok()) {
    spdlog::debug("workers' deaths are seen when they can be reaped only: {}", made.status().message());
    return;
  }
  dying_ = std::move(made).value();
  if (guard_ != nullptr) guard_->remove_on_exit("/dev/shm/" + dying_->segment_name());
}

WorkerRecord* LocalWorkers::reap() {
  WorkerRecord* first_failed = nullptr;
  for (WorkerRecord& record : records_) {
    if (record.pid <= 0 || record.exited) continue;
    int status = 0;
    if (!reap_if_exited(record.pid, &status)) continue;
    spdlog::debug("rank {} (pid {}) {}", record.rank, record.pid, describe_wait_status(status));
    record.exited = true;
    record.wait_status = status;
    events_.exit_recorded(record);
    if (is_failure(status) && first_failed == nullptr) first_failed = &record;
  }
  strays_.reap_exited();
  return first_failed;
}

bool LocalWorkers::awaits_explanation(const JobEnd& end) const {
  return awaits_named_rank(end, records_);
}

void LocalWorkers::signal_all(int sig) {
  signal_groups(sig);
  strays_.signal(sig);
}

void LocalWorkers::signal_groups(int sig) {
  for (WorkerRecord& record : records_) {
    if (record.pid <= 0) continue;
    // A group whose members are all gone answers ESRCH, which is fine.
    if (signal_group(record.pid, sig) && !record.exited) record.signalled_by_hvrun = true;
  }
}

void LocalWorkers::grace_over() {
  if (killed_) return;
  bool anyone = false;
  for (const WorkerRecord& r : records_) anyone |= r.pid > 0 && group_has_live_members(r.pid);
  if (anyone) events_.say("grace period over: sending SIGKILL to the ranks still running");
  signal_all(SIGKILL);
  killed_ = true;
}

void LocalWorkers::kill_now(int sig) {
  if (killed_) return;
  events_.say("received " + signal_name(sig) + " again: sending SIGKILL to every rank now");
  signal_all(SIGKILL);
  killed_ = true;
}

bool LocalWorkers::running() const {
  for (const WorkerRecord& r : records_)
    if (r.pid > 0 && !r.exited) return true;
  return false;
}

bool LocalWorkers::settle_leftovers(bool may_wait) {
  bool leftovers = false;
  for (const WorkerRecord& r : records_) leftovers |= r.pid > 0 && group_has_live_members(r.pid);
  if (leftovers && may_wait && !killed_) return false;
  // Past the teardown's grace period (or hvrun signalled twice) strays get no more time either.
  const bool hurry = killed_;
  if (leftovers) {
    // Every worker exited but left processes behind; they would be orphans.
    signal_groups(SIGKILL);
    killed_ = true;
  }
  if (!strays_.settle(hurry)) return false;
  if (strays_.take_unreported())
    events_.say("ended what the ranks left running outside their process groups: " +
                strays_.report());
  return true;
}

bool LocalWorkers::output_open() const {
  for (const auto& pipe : pipes_)
    if (pipe->open) return true;
  return false;
}

void LocalWorkers::close_output() {
  for (auto& pipe : pipes_)
    if (pipe->open) close_pipe(*pipe);
}

}  // namespace hvrun::launcher
