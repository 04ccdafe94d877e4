#include "launcher/remote/multi_host_runner.h"

#include "launcher/remote/agent_links.h"
#include "launcher/supervisor/job_supervisor.h"
#include "launcher/supervisor/rank_streams.h"

namespace hvrun::launcher {

namespace {
// As many as an agent starts (agent.cc): an elastic job's replacements and added slots each
// take a new record.
constexpr size_t kMostRecords = 1024;
}  // namespace

MultiHostRunner::MultiHostRunner(const MultiHostRunnerConfig& config, OutputSink& out,
                                 OutputSink& err)
    : SupervisedJob(config, out, err), config_(config) {}
MultiHostRunner::~MultiHostRunner() = default;

int MultiHostRunner::run(std::vector<AgentLink> links, Starter& starter) {
  AgentLinks agents(supervisor().io(), supervisor().workers(), streams(), supervisor(),
                    config_.verbose);
  agents_ = &agents;
  PreStartHooks hooks{[&starter] { starter.progress(); },
                      [&starter](const AgentLink& link) { return starter.describe_exit(link); }};
  int code = supervisor().run(agents, [&] {
    agents.start(std::move(links), std::move(hooks));
    starter.begin();
  });
  agents_ = nullptr;
  return code;
}

boost::asio::io_context& MultiHostRunner::io() { return supervisor().io(); }

std::vector<AgentLink*> MultiHostRunner::agents() { return agents_->agents(); }

bool MultiHostRunner::ending() const { return supervisor().ending(); }

void MultiHostRunner::job_starting(const std::vector<RemoteRank>& ranks) {
  // The agents start their ranks on START: without the directory each rank's copy fails alone.
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
  agents_->job_started(std::move(link_of_rank));
}

int MultiHostRunner::add_record(const std::string& host) {
  std::vector<WorkerRecord>& workers = supervisor().workers();
  if (workers.size() >= kMostRecords) {
    say("elastic: this job has started " + std::to_string(workers.size()) +
        " processes, its most; no new rank on " + host);
    return -1;
  }
  const int id = static_cast<int>(workers.size());
  WorkerRecord w;
  w.rank = id;
  w.host = host;
  workers.push_back(w);
  streams().begin(workers.back());
  return id;
}

void MultiHostRunner::lose(JobEnd end) { supervisor().child_lost(std::move(end)); }

void MultiHostRunner::end_before_start(int exit_code, std::string message) {
  agents_->abandon();
  supervisor().end_before_start(exit_code, std::move(message));
}

}  // namespace hvrun::launcher
