#include "launcher/remote/remote_growth.h"

#include <signal.h>
#include <unistd.h>

#include "launcher/remote/agent_links.h"
#include "launcher/remote/agent_protocol.h"
#include "launcher/remote/multi_host_runner.h"
#include "launcher/remote/reach_probe.h"
#include "launcher/supervisor/job_summary.h"

namespace hvrun::launcher {

namespace {
constexpr std::chrono::milliseconds kProbeTimeout{2000};  // as the agents give each probe
const char* const kLaunchHost = "hvrun's host";
}  // namespace

RemoteGrowth::RemoteGrowth(GrowthJob job, MultiHostRunner& runner)
    : job_(std::move(job)), runner_(runner) {}

RemoteGrowth::~RemoteGrowth() {
  for (std::thread& t : probes_) t.join();
}

void RemoteGrowth::adopt(const std::string& host, size_t link, const InterfaceChoice& choice) {
  Host& h = hosts_[host];
  h.link = link;
  h.ready = true;
  h.choice = choice;
  h.coordinator = job_.coordinator_addresses.front();
}

int RemoteGrowth::start(const ElasticSlot& slot, bool spare) {
  const int id = runner_.add_record(slot.host);
  if (id < 0) return -1;
  if (spare) spares_.insert(id);
  auto it = hosts_.find(slot.host);
  if (it != hosts_.end() && !it->second.failed &&
      (!it->second.ready || runner_.links().takes_ranks(it->second.link))) {
    Host& host = it->second;
    runner_.links().add_rank(id, host.link);
    if (host.ready)
      send_rank(host, id, slot);
    else
      host.waiting.emplace_back(id, slot);
    return id;
  }
  // No agent there that takes ranks: a new one, which gets this rank once it has the job.
  hosts_.erase(slot.host);
  Host& host = hosts_[slot.host];
  host.generation = ++generations_;
  host.waiting.emplace_back(id, slot);
  start_agent(slot.host, host);
  return id;
}

bool RemoteGrowth::cancel_waiting(int id) {
  for (auto& [name, host] : hosts_) {
    if (host.ready || host.failed) continue;
    for (const auto& waiting : host.waiting)
      if (waiting.first == id) {
        fail(host, "host " + name + ": no longer needed (the training is over)");
        return true;
      }
  }
  return false;
}

void RemoteGrowth::send_rank(Host& host, int id, const ElasticSlot& slot) {
  const std::vector<std::string> envp =
      job_.environment(id, slot, spares_.count(id) > 0, host.choice, host.coordinator);
  runner_.links().agent(host.link).send(
      encode_frame("WORKER", {std::to_string(id)}, join_list(envp)));
}

bool RemoteGrowth::start_agent(const std::string& name, Host& host) {
  auto link = job_.start_agent(name);
  if (!link.is_ok()) {
    fail(host, "host " + name + ": cannot start its agent: " + link.status().message());
    return false;
  }
  runner_.say("elastic: starting the agent of " + name + " (" + link->program + ")");
  host.link = runner_.links().add(
      std::move(link).value(),
      PreStartHooks{[this, name] { on_progress(name); }, job_.describe_exit});
  for (const auto& [id, slot] : host.waiting) runner_.links().add_rank(id, host.link);
  host.deadline = std::make_unique<boost::asio::steady_timer>(runner_.io(), job_.start_timeout);
  host.deadline->async_wait([this, name](boost::system::error_code ec) {
    auto it = hosts_.find(name);
    if (ec || it == hosts_.end() || it->second.ready || it->second.failed) return;
    const double seconds = static_cast<double>(job_.start_timeout.count()) / 1000.0;
    fail(it->second,
         "host " + name + ": its agent did not get ready within --start-timeout (" +
             std::to_string(static_cast<int>(seconds)) + " s)");
  });
  return true;
}

void RemoteGrowth::on_progress(const std::string& name) {
  auto it = hosts_.find(name);
  if (it == hosts_.end() || it->second.ready || it->second.failed) return;
  Host& host = it->second;
  AgentLink& link = runner_.links().agent(host.link);
  if (!link.failure.empty()) return fail(host, link.failure);
  if (!link.hello || !link.interfaces_done) return;
  if (std::string problem = job_.version_problem(link); !problem.empty())
    return fail(host, problem);
  if (!host.probe_sent) {
    host.probe_sent = true;
    link.send(encode_frame("PROBE", {}, join_list(job_.coordinator_addresses)));
    if (job_.forced_interfaces.empty())
      probe_from_here(name, host, link);
    else
      host.probed = true;
  }
  if (link.probes_done && host.probed) join(name, host);
}

void RemoteGrowth::probe_from_here(const std::string& name, const Host& host,
                                   const AgentLink& link) {
  std::vector<std::string> targets;
  for (const NetInterface& i : rank_candidates(link.interfaces, nullptr))
    if (i.probe_port > 0) targets.push_back(i.address + ":" + std::to_string(i.probe_port));
  // A blocking connect per target: off the loop, which keeps serving the running ranks.
  probes_.emplace_back([this, name, targets, generation = host.generation] {
    std::vector<ProbeOutcome> outcomes;
    for (const ProbeResult& r : probe_targets(targets, kProbeTimeout))
      outcomes.push_back(ProbeOutcome{kLaunchHost, r.target, r.reached, r.error});
    runner_.post_task([this, name, generation, outcomes = std::move(outcomes)] {
      auto it = hosts_.find(name);
      if (it == hosts_.end() || it->second.generation != generation || it->second.probed) return;
      it->second.probes = outcomes;
      it->second.probed = true;
      on_progress(name);
    });
  });
}

void RemoteGrowth::join(const std::string& name, Host& host) {
  AgentLink& link = runner_.links().agent(host.link);
  std::string tried;
  for (const std::string& address : job_.coordinator_addresses) {
    for (const ProbeOutcome& p : link.probes) {
      if (p.target != address) continue;
      if (p.reached) host.coordinator = address;
      else tried += (tried.empty() ? "" : ", ") + address + " (" + p.error + ")";
    }
    if (!host.coordinator.empty()) break;
  }
  if (host.coordinator.empty())
    return fail(host, "host " + name + " cannot reach the coordinator at " +
                          (tried.empty() ? job_.coordinator_addresses.front() : tried));
  auto choice = choose_interface(HostInterfaces{name, link.interfaces}, {kLaunchHost}, host.probes,
                                 job_.forced_interfaces);
  if (!choice.is_ok()) return fail(host, choice.status().message());
  host.choice = *choice;
  host.ready = true;
  host.deadline->cancel();
  link.send(encode_frame("CWD", {}, job_.cwd));
  link.send(encode_frame("ARGV", {}, join_list(job_.argv)));
  for (const auto& [id, slot] : host.waiting) send_rank(host, id, slot);
  host.waiting.clear();
  link.send(encode_frame("START", {}, host.coordinator));
  runner_.links().link_started(host.link);
  runner_.say("elastic: " + name + " joined: its agent runs, its ranks use " +
              host.choice.interface + " " + host.choice.address);
}

void RemoteGrowth::fail(Host& host, const std::string& why) {
  if (host.failed) return;
  host.failed = true;
  if (host.deadline) host.deadline->cancel();
  if (host.probe_sent || host.deadline) {
    AgentLink& link = runner_.links().agent(host.link);
    if (link.failure.empty()) link.failure = why;
    if (link.pid > 0 && !link.exited) ::kill(-link.pid, SIGKILL);  // reaped by the links
  }
  if (host.waiting.empty()) return;
  for (const auto& [id, slot] : host.waiting)
    runner_.records().at(static_cast<size_t>(id)).lost = "never started (" + why + ")";
  host.waiting.clear();
  runner_.post_task([this, why] {
    runner_.lose(JobEnd{JobEndKind::kControlPlane, -1, 1, 0, why});
  });
}

}  // namespace hvrun::launcher
