// Runs a multi-host job once every agent has its workers' description: multiplexes the agents'
// frames (worker output, starts, exits), forwards signals and decides how the job ends, with the
// same rules and summary as the single-host JobRunner (job_runner.h):
//  - every rank exits 0 and every agent says BYE: exit 0;
//  - the first rank to fail, a control-plane failure, SIGINT/SIGTERM, or an agent lost before
//    its BYE (its remote shell ended: host down, agent killed, ssh session cut) starts the
//    teardown: the coordinator aborts the job, every agent gets SIGNAL (SIGTERM or the forwarded
//    signal), then KILL after the grace period; remote shells still running 5 s after that are
//    killed, which makes their agents kill their workers. The summary names the host.
//  - the failure reported is the first cause, by the same rules as JobRunner's
//    (launcher/supervisor/job_verdict.h's first_cause), judged once the first failure has waited
//    kExplainDelay for the frames that explain it (JobRunner waits only while the rank the
//    coordinator named still runs).
//
// One Boost.Asio loop on the calling thread owns everything; post_* are the thread-safe members.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/remote/agent_link.h"
#include "launcher/supervisor/job_summary.h"
#include "launcher/supervisor/job_verdict.h"
#include "launcher/process/output_mux.h"

namespace hvrun::launcher {

struct RemoteRank {
  int rank = 0;
  std::string host;
  size_t link = 0;  // index into the links
};

struct MultiHostRunnerConfig {
  std::chrono::milliseconds grace_period{5000};
  std::string output_dir;
  bool tag_output = true;
  bool verbose = false;
  CoordinatorHooks coordinator;  // the job's coordinator (empty members: none)
};

class MultiHostRunner {
 public:
  MultiHostRunner(MultiHostRunnerConfig config, OutputSink& out, OutputSink& err);
  ~MultiHostRunner();
  MultiHostRunner(const MultiHostRunner&) = delete;
  MultiHostRunner& operator=(const MultiHostRunner&) = delete;

  // Takes the links over (their START was sent) and runs until the job is over; returns hvrun's
  // exit code.
  int run(std::vector<AgentLink> links, const std::vector<RemoteRank>& ranks);
  // After run(): how the job ended (none when it succeeded).
  std::optional<JobEnd> end() const;

  void post_control_plane_failure(std::string message, int rank);
  void post_note(std::string message);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvrun::launcher
