// What single-host jobs (job_runner.h) and multi-host jobs (remote/multi_host_runner.h) share
// around the job supervisor (job_supervisor.h): its settings, the ranks' rank-tagged output
// (rank_streams.h), and the entry points other threads call.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/process/output_mux.h"
#include "launcher/supervisor/job_summary.h"
#include "launcher/supervisor/job_verdict.h"

namespace hvrun::launcher {

class JobSupervisor;
class RankStreams;

struct SupervisedJobConfig {
  std::chrono::milliseconds grace_period{5000};
  std::string output_dir;  // --output-filename; empty: no files
  bool tag_output = true;
  bool output_timestamps = false;  // --output-timestamps
  bool verbose = false;
  CoordinatorHooks coordinator;  // the job's coordinator (empty members: none)
  std::function<bool(const JobEnd&)> absorb_failure;  // job_supervisor.h FailureAbsorber
};

class SupervisedJob {
 public:
  SupervisedJob(const SupervisedJobConfig& config, OutputSink& out, OutputSink& err);
  ~SupervisedJob();
  SupervisedJob(const SupervisedJob&) = delete;
  SupervisedJob& operator=(const SupervisedJob&) = delete;

  // After the run: how the job ended (none when it succeeded).
  std::optional<JobEnd> end() const;

  // Thread-safe: the control plane failed (message for the user; rank it concerns or -1).
  void post_control_plane_failure(std::string message, int rank);
  // Thread-safe: a line worth printing with --verbose.
  void post_note(std::string message);
  // Thread-safe: runs `task` on the supervisor's loop (a finished autopsy's report).
  void post_task(std::function<void()> task);

  // On the supervisor's loop: the ranks' records (indexed by the rank each was started as),
  // whether the job is being torn down, and a line for the user ("hvrun: " is added).
  std::vector<WorkerRecord>& records();
  bool tearing_down() const;
  void say(const std::string& text);

 protected:
  JobSupervisor& supervisor();
  const JobSupervisor& supervisor() const;
  RankStreams& streams();
  // Creates the --output-filename directory, if any; false (said) when it cannot.
  bool make_output_dir();

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
  std::string output_dir_;
};

}  // namespace hvrun::launcher
