// hvrun's supervision of one job over its children (children.h): this host's workers
// (single-host jobs, job_runner.h) or the agents of every host (remote/multi_host_runner.h).
// It runs the launcher's event loop (supervisor_loop.h) and decides how the job ends:
//  - every rank exits 0: exit 0 (a rank exiting 0 early is not a failure, unless the
//    coordinator fails the job for it: a rank that never registered);
//  - the first rank to fail, a control-plane failure (registration timeout, abort, lost
//    worker), a rank that cannot start, a lost child (an agent gone before its BYE) or
//    SIGINT/SIGTERM to hvrun starts the teardown: the job is aborted on the coordinator, every
//    rank gets SIGTERM (the forwarded signal for SIGINT/SIGTERM), then SIGKILL after the grace
//    period, or at once on a second signal; hvrun exits with the failed rank's code (128+signal
//    for a signal), 128+signal for a forwarded signal, 1 for a control-plane failure, 2 when a
//    rank could not be started, and prints a summary.
//  - the failure it reports is the first cause (job_verdict.h): a rank's exit that followed the
//    coordinator's abort is a consequence; the rank the abort names is the cause. When the
//    children say a better explanation may be a moment away (Children::awaits_explanation),
//    the verdict waits kExplainDelay for it.
//
// SIGUSR1 to hvrun asks every rank for an autopsy (launcher/autopsy/); the job goes on.
//
// Threads: one, the caller of run(); post_* are the only thread-safe members.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/process/output_mux.h"
#include "launcher/supervisor/children.h"
#include "launcher/supervisor/job_verdict.h"
#include "launcher/supervisor/supervisor_loop.h"

namespace hvrun::launcher {

// How long the first failure may wait for the exit or loss that explains it: a dying process
// closes its sockets (and the coordinator reports it lost) before its exit can be read, and a
// host's agent is seen gone after the coordinator saw that host's workers drop.
inline constexpr std::chrono::milliseconds kExplainDelay{300};

// Elastic jobs: a rank's failure the job survives. Returns true when it goes on without that
// rank (the supervisor then neither tears down nor reports it as the job's end).
using FailureAbsorber = std::function<bool(const JobEnd& failure)>;

struct SupervisorConfig {
  std::chrono::milliseconds grace_period{5000};
  bool verbose = false;
  CoordinatorHooks coordinator;  // the job's coordinator (empty members: none)
  FailureAbsorber absorb_failure;  // empty: every rank's failure ends the job
};

class JobSupervisor final : public ChildrenEvents {
 public:
  // Watches SIGINT and SIGTERM from now on.
  JobSupervisor(SupervisorConfig config, OutputSink& err);
  JobSupervisor(const JobSupervisor&) = delete;
  JobSupervisor& operator=(const JobSupervisor&) = delete;

  boost::asio::io_context& io() { return io_; }
  // One record per rank, indexed by rank: size it before run().
  std::vector<WorkerRecord>& workers() { return workers_; }

  // Runs `start` (which starts the children) with signals watched, then the loop until the job
  // is over; prints the summary and returns hvrun's exit code.
  int run(Children& children, const std::function<void()>& start);
  // After run(): how the job ended (none when it succeeded).
  std::optional<JobEnd> end() const { return end_; }

  // The job cannot start, and its starter already said why and is ending the children: once
  // they are gone, run() returns `exit_code` without a summary.
  void end_before_start(int exit_code, std::string message);
  // True once the job is ending (a failure, a signal, or end_before_start()).
  bool ending() const { return tearing_down_; }

  // Thread-safe: the control plane failed (message for the user; rank it concerns or -1).
  void post_control_plane_failure(std::string message, int rank);
  // Thread-safe: a line worth printing with --verbose.
  void post_note(std::string message);
  // Thread-safe: runs `task` on the loop's thread.
  void post_task(std::function<void()> task);

  void exit_recorded(const WorkerRecord& record) override;
  void rank_failed(const WorkerRecord& record) override;
  void start_failed(JobEnd end) override;
  void child_lost(JobEnd end) override;
  void rank_dying(WorkerRecord& record, int wait_status) override;
  void say(const std::string& text) override;
  void progress() override;

 private:
  void on_stop_signal(int sig);
  // SIGUSR1: asks the coordinator for an autopsy of every rank (the job goes on).
  void wait_autopsy_signal();
  // The first cause of the end `seen` (job_verdict.h), with what the coordinator recorded.
  JobEnd cause_of(const JobEnd& seen) const;
  // False when the one child runs every rank itself (a labelled record: mpirun, for hvrun
  // --mpi): the coordinator's verdict names ranks hvrun has no record of, and the summary has no
  // table of ranks.
  bool children_are_ranks() const { return workers_.empty() || workers_.front().label.empty(); }
  // The records the verdict and the summary speak of: the ranks, or none (children_are_ranks).
  const std::vector<WorkerRecord>& ranks() const;
  void decide(JobEnd seen);
  void begin_teardown(JobEnd end, int sig);

  SupervisorConfig config_;
  OutputSink& err_;
  boost::asio::io_context io_;
  SupervisorLoop loop_;
  boost::asio::steady_timer grace_timer_;
  boost::asio::steady_timer explain_timer_;  // a verdict waiting for its explanation
  boost::asio::signal_set autopsy_signal_;   // SIGUSR1
  Children* children_ = nullptr;
  std::vector<WorkerRecord> workers_;
  bool tearing_down_ = false;
  bool told_ = false;  // end_before_start(): the starter already told the user
  std::optional<JobEnd> first_seen_;  // the first failure seen, while the cause is settled
  bool explaining_ = false;           // explain_timer_ runs
  bool explained_ = false;            // explain_timer_ ran out: decide with what is known
  std::optional<JobEnd> end_;
};

}  // namespace hvrun::launcher
