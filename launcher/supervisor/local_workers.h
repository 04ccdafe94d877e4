// This host's worker processes as a supervisor's children: started with their output on pipes
// (worker_process.h: own process group, PR_SET_PDEATHSIG, watched by the orphan guard), reaped
// on SIGCHLD, signalled by process group (process_group.h), and, once every one exited,
// whatever they left running is given the rest of a teardown's grace period and then killed.
// What left their process groups (a double-forked daemon) is found as this process's stray
// children (stray_processes.h), ended with the job and named.
// Used by single-host jobs (job_runner.h) and by every host's agent (remote/agent.cc).
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "common/status.h"
#include "launcher/process/dying_workers.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/process/stray_processes.h"
#include "launcher/supervisor/children.h"

namespace hvrun::launcher {

class LocalWorkers final : public Children {
 public:
  // `records` (one per worker, rank and host filled in) outlives this and keeps its size.
  // `grace_period`: what a stray process gets between SIGTERM and SIGKILL once the job is over.
  // Makes this process a child subreaper (stray_processes.h).
  LocalWorkers(boost::asio::io_context& io, std::vector<WorkerRecord>& records, RankOutput& output,
               ChildrenEvents& events, OrphanGuard* guard, std::chrono::milliseconds grace_period);

  // Starts records[index]'s process: `path` with `argv`, `envp`, on `cpus` (empty: anywhere).
  // Call from the thread that lives as long as the job (PR_SET_PDEATHSIG is tied to it).
  Status start(size_t index, const std::string& path, const std::vector<std::string>& argv,
               const std::vector<std::string>& envp, const std::vector<int>& cpus);
  // From now on every started worker is watched for the moment its death begins
  // (process/dying_workers.h), reported as ChildrenEvents::rank_dying. Call before start();
  // where the segment cannot be made, workers are not watched (their exits still are).
  void watch_for_dying();

  WorkerRecord* reap() override;
  // A rank the coordinator names while it still runs: a dying process closes its sockets before
  // it can be reaped, so its exit status is a moment away.
  bool awaits_explanation(const JobEnd& end) const override;
  // Every worker's process group (the worker and whatever it started), and every stray.
  void signal_all(int sig) override;
  void grace_over() override;
  void kill_now(int sig) override;
  bool running() const override;
  bool settle_leftovers(bool may_wait) override;
  bool output_open() const override;
  void close_output() override;

 private:
  struct Pipe {
    size_t index = 0;  // into records_
    int stream = 1;    // 1 stdout, 2 stderr
    std::unique_ptr<boost::asio::posix::stream_descriptor> fd;
    std::array<char, 65536> buffer{};
    bool open = false;
  };

  void signal_groups(int sig);
  void read_more(Pipe& pipe);
  void close_pipe(Pipe& pipe);

  boost::asio::io_context& io_;
  std::vector<WorkerRecord>& records_;
  std::unique_ptr<DyingWorkers> dying_;
  // Expires with this object: a death reported after it is dropped.
  std::shared_ptr<LocalWorkers*> self_ = std::make_shared<LocalWorkers*>(this);
  RankOutput& output_;
  ChildrenEvents& events_;
  OrphanGuard* guard_;
  StrayReaper strays_;
  std::vector<std::unique_ptr<Pipe>> pipes_;  // two per started worker
  bool killed_ = false;                       // SIGKILL was sent to every group
};

}  // namespace hvrun::launcher
