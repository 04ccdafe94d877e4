#include "launcher/remote/multi_host_runner.h"

#include "launcher/remote/agent_links.h"
#include "launcher/supervisor/job_supervisor.h"
#include "launcher/supervisor/rank_streams.h"

namespace hvrun::launcher {

MultiHostRunner::MultiHostRunner(const MultiHostRunnerConfig& config, OutputSink& out,
                                 OutputSink& err)
    : SupervisedJob(config, out, err), config_(config) {}

int MultiHostRunner::run(std::vector<AgentLink> links, const std::vector<RemoteRank>& ranks) {
  // The agents already run their ranks: without the directory each rank's copy fails alone.
  make_output_dir();
  std::vector<WorkerRecord>& workers = supervisor().workers();
  workers.resize(ranks.size());
  std::vector<size_t> link_of_rank(ranks.size());
  for (const RemoteRank& r : ranks) {
    WorkerRecord& w = workers.at(static_cast<size_t>(r.rank));
    w.rank = r.rank;
    w.host = r.host;
    link_of_rank[static_cast<size_t>(r.rank)] = r.link;
    streams().begin(w);  // output may come from any rank once the agents run
  }
  AgentLinks agents(supervisor().io(), workers, std::move(link_of_rank), streams(), supervisor(),
                    config_.verbose);
  return supervisor().run(agents, [&] { agents.start(std::move(links)); });
}

}  // namespace hvrun::launcher
