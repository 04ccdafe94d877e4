// New ranks for a running multi-host elastic job (docs/elastic.md, "Across hosts"). On a host
// whose agent runs, the agent starts them at once (a WORKER frame after START). On a host without
// one (a new host, or one whose agent ended) an agent is started over the remote shell as at
// launch: its version is checked, it probes the coordinator while hvrun probes its candidate
// addresses (hvrun's host stands for the other hosts: their probe listeners closed when the job
// started), its interface is chosen as at launch, then it gets the job and its ranks. An agent
// that cannot be started, answers too late (--start-timeout) or reaches nothing loses its ranks:
// the elastic controller blacklists the host and the job goes on without it.
//
// Threads: the launcher's event loop; each new host's probes run on a thread of their own whose
// outcome is posted back (joined on destruction).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "common/status.h"
#include "launcher/elastic/membership.h"
#include "launcher/plan/network_choice.h"
#include "launcher/remote/agent_link.h"

namespace hvrun::launcher {

class MultiHostRunner;

// What every new host's agent gets, and how hvrun starts one.
struct GrowthJob {
  std::string cwd;
  std::vector<std::string> argv;
  // The coordinator's "ADDR:PORT"s, the first hosts' first: a new host gets the first it reaches.
  std::vector<std::string> coordinator_addresses;
  // The environment ("KEY=VALUE") of process `id` in `slot` (`spare`: a hot spare), on a host
  // that uses `choice` and reaches the coordinator at `coordinator`.
  std::function<std::vector<std::string>(int id, const ElasticSlot& slot, bool spare,
                                         const InterfaceChoice& choice,
                                         const std::string& coordinator)>
      environment;
  std::function<Result<AgentLink>(const std::string& host)> start_agent;
  // Why a link whose agent ended before its job did (names the host and what to try).
  std::function<std::string(const AgentLink&)> describe_exit;
  // An agent whose HELLO gives another version fails with this text (empty: it is fine).
  std::function<std::string(const AgentLink&)> version_problem;
  std::vector<std::string> forced_interfaces;  // --network-interface
  std::chrono::milliseconds start_timeout{30000};
};

class RemoteGrowth {
 public:
  RemoteGrowth(GrowthJob job, MultiHostRunner& runner);
  ~RemoteGrowth();

  // The first membership's agent of `host` is link `link`, using `choice`.
  void adopt(const std::string& host, size_t link, const InterfaceChoice& choice);
  // ElasticRunnerSide::start: a record for a new process in `slot` (`spare`: a hot spare) and
  // its start under way; its id, or -1 (said why).
  int start(const ElasticSlot& slot, bool spare);
  // Process `id` is no longer wanted: when it still waits for its host's agent, that start ends
  // (the agent is stopped, its waiting ranks lost) and true; false when `id` was sent already.
  bool cancel_waiting(int id);

 private:
  struct Host {
    int generation = 0;  // which agent of the host this is (late probe outcomes are dropped)
    size_t link = 0;
    bool ready = false;   // its agent has the job: new ranks go straight to it
    bool failed = false;  // gave up on this agent (its ranks are lost)
    bool probe_sent = false;
    bool probed = false;  // hvrun's probes of its candidates came back
    std::vector<ProbeOutcome> probes;   // hvrun's, of its candidates
    std::vector<std::pair<int, ElasticSlot>> waiting;  // ranks for when it is ready
    InterfaceChoice choice;
    std::string coordinator;  // the address of it that this host reached
    std::unique_ptr<boost::asio::steady_timer> deadline;
  };

  void send_rank(Host& host, int id, const ElasticSlot& slot);
  bool start_agent(const std::string& name, Host& host);
  void on_progress(const std::string& name);
  void probe_from_here(const std::string& name, const Host& host, const AgentLink& link);
  void join(const std::string& name, Host& host);
  // Ends the agent's start: its waiting ranks are lost (heard by the supervisor after the caller
  // returns, so the membership holds them by then). `why` names the host.
  void fail(Host& host, const std::string& why);

  GrowthJob job_;
  MultiHostRunner& runner_;
  std::map<std::string, Host> hosts_;
  std::set<int> spares_;  // ids of the processes started as hot spares
  int generations_ = 0;
  std::vector<std::thread> probes_;
};

}  // namespace hvrun::launcher
