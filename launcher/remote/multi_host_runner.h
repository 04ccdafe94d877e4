// Runs a multi-host job once every agent has its workers' description: the agents' links
// (agent_links.h) under hvrun's supervisor (supervisor/job_supervisor.h), with the same rules
// and summary as a single-host job; the summary names the host. The ranks' output arrives in
// the agents' frames and is rank-tagged onto hvrun's stdout and stderr like a single host's.
//
// Threads: run() on the calling thread; post_* are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "launcher/process/output_mux.h"
#include "launcher/remote/agent_link.h"
#include "launcher/supervisor/supervised_job.h"

namespace hvrun::launcher {

struct RemoteRank {
  int rank = 0;
  std::string host;
  size_t link = 0;  // index into the links
};

using MultiHostRunnerConfig = SupervisedJobConfig;

class MultiHostRunner : public SupervisedJob {
 public:
  MultiHostRunner(const MultiHostRunnerConfig& config, OutputSink& out, OutputSink& err);

  // Takes the links over (their START was sent) and runs until the job is over; returns hvrun's
  // exit code.
  int run(std::vector<AgentLink> links, const std::vector<RemoteRank>& ranks);

 private:
  MultiHostRunnerConfig config_;
};

}  // namespace hvrun::launcher
