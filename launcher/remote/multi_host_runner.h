// Runs a multi-host job on the launcher's event loop from the moment its agents are started:
// their links (agent_links.h) under hvrun's supervisor (supervisor/job_supervisor.h), with the
// same rules and summary as a single-host job; the summary names the host. Until every agent
// has its job, a Starter (remote_agents.cc) drives the start on the same loop; a signal to
// hvrun then ends the agents like a running job. The ranks' output arrives in the agents'
// frames and is rank-tagged onto hvrun's stdout and stderr like a single host's.
//
// Threads: run() on the calling thread, the Starter and the members below on the loop's;
// post_* are thread-safe.
#pragma once

#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "launcher/process/output_mux.h"
#include "launcher/remote/agent_link.h"
#include "launcher/supervisor/supervised_job.h"

namespace hvrun::launcher {

class AgentLinks;

struct RemoteRank {
  int rank = 0;
  std::string host;
  size_t link = 0;  // index into the links
};

using MultiHostRunnerConfig = SupervisedJobConfig;

class MultiHostRunner : public SupervisedJob {
 public:
  // What starts the job once the agents run, until it calls job_starting() or
  // end_before_start().
  class Starter {
   public:
    virtual ~Starter() = default;
    virtual void begin() = 0;     // the links are read from now on
    virtual void progress() = 0;  // a link said something, or failed
    // The `failure` of a link whose agent ended before its job started.
    virtual std::string describe_exit(const AgentLink& link) const = 0;
  };

  MultiHostRunner(const MultiHostRunnerConfig& config, OutputSink& out, OutputSink& err);
  ~MultiHostRunner();

  // Takes the links over and runs until the job is over; returns hvrun's exit code.
  int run(std::vector<AgentLink> links, Starter& starter);

  // While run() runs:
  boost::asio::io_context& io();
  std::vector<AgentLink*> agents();  // in the order given to run()
  bool ending() const;               // a signal or a failure is ending the job
  // Every agent is about to get its job: these ranks, each on its link.
  void job_starting(const std::vector<RemoteRank>& ranks);
  // The job will not start and the user was told why: every agent is ended now, and run()
  // returns `exit_code` once they are gone.
  void end_before_start(int exit_code, std::string message);

  // A running elastic job's growth (remote_growth.h):
  AgentLinks& links() { return *agents_; }
  // A new rank's record (and output streams) on `host`: its id, or -1 (said why).
  int add_record(const std::string& host);
  // Ranks were lost (their records say how): the supervisor weighs it as a lost child.
  void lose(JobEnd end);

 private:
  MultiHostRunnerConfig config_;
  AgentLinks* agents_ = nullptr;
};

}  // namespace hvrun::launcher
