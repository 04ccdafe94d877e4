#include "launcher/remote/remote_agents.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <boost/asio/steady_timer.hpp>

#include "autopsy/report_files.h"
#include "common/build_info.h"
#include "common/setting_keys.h"
#include "launcher/attempt/attempt.h"
#include "launcher/elastic/elastic_controller.h"
#include "launcher/elastic/host_discovery.h"
#include "launcher/plan/env_forwarding.h"
#include "launcher/plan/network_choice.h"
#include "launcher/plan/rank_environment.h"
#include "launcher/remote/agent_process_views.h"
#include "launcher/remote/agent_link.h"
#include "launcher/remote/agent_links.h"
#include "launcher/remote/multi_host_runner.h"
#include "launcher/remote/reach_probe.h"
#include "launcher/remote/remote_growth.h"
#include "launcher/remote/remote_health.h"
#include "launcher/remote/remote_shell.h"

namespace hvrun::launcher {
namespace {

constexpr std::chrono::milliseconds kProbeWindow{5000};  // agents give each probe 2 s
// An agent answers for its processes at once unless its loop is busy (a coordinator check
// takes at most 1 s).
constexpr std::chrono::milliseconds kAgentAnswerDeadline{2000};

std::string this_executable() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("hvrun") : p.string();
}

// Ends every agent that was started (closing stdin is enough for a healthy one).
void stop_links(std::vector<AgentLink>& links) {
  for (AgentLink& link : links) {
    if (link.in_fd >= 0) ::close(link.in_fd);
    link.in_fd = -1;
    if (link.pid > 0 && !link.exited) {
      ::kill(-link.pid, SIGKILL);
      ::waitpid(link.pid, nullptr, 0);
      link.exited = true;
    }
    for (int* fd : {&link.out_fd, &link.err_fd})
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
  }
}

std::string exit_code_of(int wait_status) {
  return std::to_string(WIFEXITED(wait_status) ? WEXITSTATUS(wait_status)
                                               : 128 + WTERMSIG(wait_status));
}

}  // namespace

// The start: the agents are started here, then everything else happens on the launcher's event
// loop (multi_host_runner.h) as the agents answer: pre-flight, probes, the network choice, the
// attempt's coordinator, the job to every agent. A phase that fails tells the user and ends the
// agents.
class AgentStart final : public MultiHostRunner::Starter {
 public:
  explicit AgentStart(Attempt& attempt)
      : attempt_(attempt),
        settings_(attempt.settings()),
        plan_(attempt.plan()),
        elastic_(attempt.elastic()),
        verbose_(attempt.verbose()),
        hvrun_path_(this_executable()),
        forced_(split_names(settings_.get(setting::kNetworkInterface))) {}
  ~AgentStart() override {
    close_listeners(own_listeners_);
    stop_links(links_);  // nothing left once run() handed them over
  }

  int run();
  // An autopsy's report with the silent ranks' process states their agents read.
  void complete_autopsy(const v1::AutopsyJobReport& collected, Placement::AutopsyReport report);

  void begin() override;
  void progress() override;
  std::string describe_exit(const AgentLink& link) const override {
    return describe_remote_failure(link.host, link.program,
                                   std::atoi(exit_code_of(link.wait_status).c_str()), link.err_text,
                                   hvrun_path_);
  }

 private:
  enum class Phase { kHello, kProbes, kRunning, kOver };

  bool start_agents();
  Result<AgentLink> start_agent(const std::string& host) const;
  // Why `link`'s agent cannot serve this job (another version), or empty.
  std::string version_problem(const AgentLink& link) const;
  void check_versions();
  void send_probes();
  void start_job();
  bool choose_network();
  std::string network_summary(const std::string& coordinator) const;
  std::string network_details() const;
  std::vector<RemoteRank> ranks_by_link() const;
  // CWD, ARGV, a WORKER per rank (the secret inside its environment) and START to every agent.
  void send_job();
  // The NCCL and network variables of a host's ranks; `reasons` gets one line per variable.
  NcclTuning host_tuning(const InterfaceChoice& choice, std::vector<std::string>* reasons) const;
  // An elastic job's: growth across hosts, and the discovery script's thread.
  void start_growth();
  void start_elastic_controller();
  std::vector<std::string> new_rank_environment(int id, const ElasticSlot& slot, bool spare,
                                                const InterfaceChoice& choice,
                                                const std::string& coordinator) const;

  // Whether every agent that has not failed says `done` of itself.
  bool all_answered(bool (*done)(const AgentLink&)) const;
  bool any_failed() const;
  void arm_deadline(std::chrono::steady_clock::time_point deadline);
  void on_deadline();
  // The agents' failures under the heading `what`, then the job ends before it started.
  void fail(const std::string& what);
  // The job ends before it started; the user was told why.
  void give_up(const std::string& why);
  std::string late(const AgentLink& link) const {
    std::string said = link.err_text;
    while (!said.empty() && said.back() == '\n') said.pop_back();
    return "host " + link.host + ": hvrun agent did not answer within --start-timeout (" +
           settings_.text(setting::kStartTimeoutSeconds.name) + " s)" +
           (said.empty() ? "" : "; " + link.program + " said: " + said) +
           "; check that " + link.program + " reaches it, or raise --start-timeout";
  }

  static bool answered_hello(const AgentLink& l) { return l.hello && l.interfaces_done; }
  static bool answered_probes(const AgentLink& l) { return l.probes_done; }

  Attempt& attempt_;
  const Settings& settings_;
  const JobPlan& plan_;
  const ElasticOptions& elastic_;  // enabled: lost ranks and hosts end only the membership
  const bool verbose_;
  const std::string hvrun_path_;
  const std::vector<std::string> forced_;  // --network-interface
  std::vector<AgentLink> links_;           // one per host, in plan_.hosts order, until run()
  std::vector<NetInterface> own_;          // the launch host's interfaces (the coordinator's)
  std::vector<int> own_listeners_;

  std::unique_ptr<MultiHostRunner> runner_;  // kept after run(): the attempt reads its end
  // While run() runs:
  std::vector<AgentLink*> agents_;  // the links, read by the runner
  Phase phase_ = Phase::kHello;
  std::chrono::steady_clock::time_point deadline_;  // --start-timeout from begin()
  std::optional<boost::asio::steady_timer> deadline_timer_;
  std::vector<InterfaceChoice> choices_;  // per link
  InterfaceChoice coordinator_;
  std::string coordinator_address_;  // "ADDR:PORT", as the first hosts reach it
  Environment forwarded_;            // what of the launch environment the ranks get

  std::unique_ptr<ElasticController> controller_;
  std::unique_ptr<RemoteGrowth> growth_;  // with --host-discovery-script
  std::unique_ptr<DiscoveryThread> discovery_;
  std::unique_ptr<HealthGate> health_gate_;  // with --health-check: hosts checked before new ranks
  std::unique_ptr<AgentProcessViews> process_views_;  // once the job started
};

Result<AgentLink> AgentStart::start_agent(const std::string& host) const {
  const RemoteShellOptions rsh =
      RemoteShellOptions::from_settings(settings_, std::getenv("SLURM_JOB_ID") != nullptr);
  // Under srun every host's agent is a step of the allocation, this one's too.
  std::vector<std::string> argv = !rsh.srun && LocalHostNames::of_this_machine().is_local(host)
                                      ? std::vector<std::string>{hvrun_path_, "agent"}
                                      : remote_agent_command(rsh, host, hvrun_path_);
  if (verbose_) {
    std::string line;
    for (const std::string& a : argv) line += " " + a;
    std::cerr << "hvrun: " << host << ":" << line << "\n";
  }
  return start_agent_link(host, argv, &attempt_.guard(), rsh.srun ? shapes_srun_tasks : nullptr);
}

bool AgentStart::start_agents() {
  for (const HostSlots& h : plan_.hosts) {
    auto link = start_agent(h.host);
    if (!link.is_ok()) {
      std::cerr << "hvrun: cannot start the agent of " << h.host << ": " << link.status().message()
                << "\n";
      return false;
    }
    links_.push_back(std::move(link).value());
  }
  own_ = list_local_interfaces();
  own_listeners_ = open_probe_listeners(own_);
  return true;
}

void AgentStart::begin() {
  agents_ = runner_->agents();
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::milliseconds(
                  static_cast<int64_t>(settings_.get(setting::kStartTimeoutSeconds) * 1000.0));
  arm_deadline(deadline_);
  progress();
}

void AgentStart::progress() {
  if (phase_ == Phase::kRunning || phase_ == Phase::kOver) return;
  if (runner_->ending()) {  // a signal to hvrun: the supervisor ends the agents
    phase_ = Phase::kOver;
    deadline_timer_->cancel();
    return;
  }
  if (phase_ == Phase::kHello) {
    // Another version may not speak the rest of this one's protocol: judged on its HELLO.
    check_versions();
    if (!all_answered(answered_hello)) return;
    if (any_failed()) return fail("pre-flight check of the hosts failed");
    phase_ = Phase::kProbes;
    arm_deadline(std::max(deadline_, std::chrono::steady_clock::now() + kProbeWindow));
    send_probes();
    return;
  }
  if (!all_answered(answered_probes)) return;
  close_listeners(own_listeners_);
  if (any_failed()) return fail("probing the network failed");
  deadline_timer_->cancel();
  phase_ = Phase::kRunning;
  start_job();
}

bool AgentStart::all_answered(bool (*done)(const AgentLink&)) const {
  for (const AgentLink* link : agents_)
    if (link->failure.empty() && !done(*link)) return false;
  return true;
}

bool AgentStart::any_failed() const {
  for (const AgentLink* link : agents_)
    if (!link->failure.empty()) return true;
  return false;
}

void AgentStart::arm_deadline(std::chrono::steady_clock::time_point deadline) {
  deadline_timer_->expires_at(deadline);
  deadline_timer_->async_wait([this](boost::system::error_code ec) {
    // A wait that had already completed when the deadline moved on is not this deadline's.
    if (!ec && deadline_timer_->expiry() <= std::chrono::steady_clock::now()) on_deadline();
  });
}

void AgentStart::on_deadline() {
  if (phase_ != Phase::kHello && phase_ != Phase::kProbes) return;
  if (runner_->ending()) return progress();  // a signal is ending the job: nothing to report
  const bool hello = phase_ == Phase::kHello;
  for (AgentLink* link : agents_)
    if (link->failure.empty() && !(hello ? answered_hello(*link) : answered_probes(*link)))
      link->failure = late(*link);
  fail(hello ? "pre-flight check of the hosts failed" : "probing the network failed");
}

void AgentStart::fail(const std::string& what) {
  std::string text = "hvrun: " + what + ":\n";
  for (const AgentLink* link : agents_)
    if (!link->failure.empty()) text += "hvrun:   " + link->failure + "\n";
  attempt_.err().write_message(text);
  give_up(what);
}

void AgentStart::give_up(const std::string& why) {
  phase_ = Phase::kOver;
  deadline_timer_->cancel();
  close_listeners(own_listeners_);
  runner_->end_before_start(1, why);
}

std::string AgentStart::version_problem(const AgentLink& link) const {
  const std::string version(build_info().version);
  if (!link.hello || link.version == version) return "";
  return "host " + link.host + " runs hvrun " + link.version + " at " + hvrun_path_ +
         ", this is hvrun " + version + ": install the same version on every host";
}

void AgentStart::check_versions() {
  for (AgentLink* link : agents_)
    if (link->failure.empty()) link->failure = version_problem(*link);
}

void AgentStart::send_probes() {
  // Each agent tries the other hosts' candidates (unless --network-interface decided them) and
  // the launch host's (for the coordinator).
  auto targets_of = [](const std::vector<NetInterface>& ifaces) {
    std::vector<std::string> out;
    for (const NetInterface& i : rank_candidates(ifaces, nullptr))
      if (i.probe_port > 0) out.push_back(i.address + ":" + std::to_string(i.probe_port));
    return out;
  };
  for (size_t i = 0; i < agents_.size(); ++i) {
    std::vector<std::string> targets = targets_of(own_);
    if (forced_.empty())
      for (size_t j = 0; j < agents_.size(); ++j)
        if (j != i)
          for (const std::string& t : targets_of(agents_[j]->interfaces)) targets.push_back(t);
    agents_[i]->send(encode_frame("PROBE", {}, join_list(targets)));
  }
}

bool AgentStart::choose_network() {
  std::vector<ProbeOutcome> probes;
  std::vector<std::string> all_hosts;
  for (const AgentLink* link : agents_) {
    probes.insert(probes.end(), link->probes.begin(), link->probes.end());
    all_hosts.push_back(link->host);
  }
  std::vector<std::string> errors;
  for (const AgentLink* link : agents_) {
    std::vector<std::string> peers;
    for (const std::string& h : all_hosts)
      if (h != link->host) peers.push_back(h);
    auto choice =
        choose_interface(HostInterfaces{link->host, link->interfaces}, peers, probes, forced_);
    if (choice.is_ok())
      choices_.push_back(*choice);
    else
      errors.push_back(choice.status().message());
  }
  auto coordinator = choose_interface(HostInterfaces{"", own_}, all_hosts, probes, {});
  if (coordinator.is_ok())
    coordinator_ = *coordinator;
  else
    errors.push_back("coordinator: " + coordinator.status().message());
  if (errors.empty()) return true;
  std::string text = "hvrun: no usable network between the hosts:\n";
  for (const std::string& e : errors) text += "hvrun:   " + e + "\n";
  attempt_.err().write_message(text);
  return false;
}

std::string AgentStart::network_summary(const std::string& coordinator) const {
  std::string text = "hvrun: job " + attempt_.job_id() + ": " + std::to_string(plan_.size) + " ranks on " +
                     std::to_string(agents_.size()) + (agents_.size() == 1 ? " host" : " hosts") +
                     "; coordinator " + coordinator +
                     " (" + coordinator_.interface + ")";
  for (const InterfaceChoice& c : choices_)
    text += "; " + c.host + " uses " + c.interface + " " + c.address;
  return text + "\n";
}

std::string AgentStart::network_details() const {
  std::string text;
  for (const std::string& r : coordinator_.reasons)
    text += "hvrun: network: launch host: " + r + "\n";
  for (const InterfaceChoice& c : choices_)
    for (const std::string& r : c.reasons) text += "hvrun: network: " + c.host + ": " + r + "\n";
  return text;
}

std::vector<RemoteRank> AgentStart::ranks_by_link() const {
  std::vector<RemoteRank> ranks;
  for (size_t i = 0; i < agents_.size(); ++i)
    for (const RankSlot& slot : plan_.ranks)
      if (slot.host == agents_[i]->host) ranks.push_back(RemoteRank{slot.rank, slot.host, i});
  return ranks;
}

NcclTuning AgentStart::host_tuning(const InterfaceChoice& choice,
                                   std::vector<std::string>* reasons) const {
  NcclTuning tuning = attempt_.nccl();
  for (const auto& [k, v] : host_network_environment(choice, settings_.get(setting::kNetwork),
                                                     attempt_.launch_environment(), reasons))
    tuning.set[k] = v;
  return tuning;
}

std::vector<std::string> AgentStart::new_rank_environment(int id, const ElasticSlot& slot,
                                                          bool spare,
                                                          const InterfaceChoice& choice,
                                                          const std::string& coordinator) const {
  return to_envp(attempt_.member_environment(id, slot, spare,
                                             attempt_.identity(coordinator, choice.address),
                                             host_tuning(choice, nullptr), forwarded_));
}

void AgentStart::send_job() {
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  for (size_t i = 0; i < agents_.size(); ++i) {
    AgentLink& link = *agents_[i];
    const InterfaceChoice& choice = choices_[i];
    std::vector<std::string> reasons;
    const NcclTuning tuning = host_tuning(choice, &reasons);
    if (verbose_)
      for (const std::string& r : reasons)
        attempt_.err().write_message("hvrun: NCCL: " + choice.host + ": " + r + "\n");
    const JobIdentity identity = attempt_.identity(coordinator_address_, choice.address);
    link.send(encode_frame("CWD", {}, cwd));
    link.send(encode_frame("ARGV", {}, join_list(attempt_.options().command)));
    for (const RankSlot& slot : plan_.ranks) {
      if (slot.host != link.host) continue;
      const Environment env = attempt_.rank_environment(slot.rank, identity, tuning, forwarded_);
      if (verbose_) attempt_.err().write_message(Attempt::environment_line(slot.rank, env, forwarded_));
      link.send(encode_frame("WORKER", {std::to_string(slot.rank)}, join_list(to_envp(env))));
    }
    link.send(encode_frame("START", {}, coordinator_address_));
  }
}

void AgentStart::complete_autopsy(const v1::AutopsyJobReport& collected,
                                  Placement::AutopsyReport report) {
  // The ranks that did not answer: their hosts' agents read their /proc.
  if (process_views_)
    process_views_->fill(collected, std::move(report));
  else
    report(collected);
}

void AgentStart::start_job() {
  if (!choose_network()) return give_up("no usable network between the hosts");
  MultiHostRunner* runner = runner_.get();
  process_views_ = std::make_unique<AgentProcessViews>(
      runner->io(),
      [runner](const std::string& host, const std::string& frame) {
        return runner->links().send_to(host, frame);
      },
      kAgentAnswerDeadline);
  runner->links().on_replies([this](const std::string& host, const Frame& f) {
    process_views_->on_reply(host, f);
  });
  // A job that may grow listens on every address of this host: a host it grows to may reach
  // this one on another network than the first hosts did (each is given an address it reached).
  const bool may_grow = elastic_.enabled && !elastic_.discovery_script.empty();
  const std::string listen = (may_grow ? std::string("0.0.0.0") : coordinator_.address) + ":" +
                             std::to_string(settings_.get(setting::kCoordinatorPort));
  auto bound = attempt_.start_coordinator(listen);
  if (!bound.is_ok()) {
    attempt_.err().write_message("hvrun: " + bound.status().message() + "\n");
    return give_up(bound.status().message());
  }
  coordinator_address_ = coordinator_.address + bound->substr(bound->rfind(':'));
  forwarded_ =
      forwarded_environment(attempt_.launch_environment(), attempt_.options().exports, nullptr);
  attempt_.err().write_message(network_summary(coordinator_address_));
  if (verbose_) {
    std::string text = network_details();
    for (const std::string& r : attempt_.nccl().reasons) text += "hvrun: NCCL: " + r + "\n";
    attempt_.err().write_message(text);
  }
  runner_->job_starting(ranks_by_link());
  if (controller_)
    for (const RankSlot& slot : plan_.ranks) controller_->started(slot.rank, {slot.host, slot.local_rank});
  send_job();
  if (controller_ && !elastic_.discovery_script.empty()) start_growth();
}

void AgentStart::start_growth() {
  std::error_code ec;
  GrowthJob job;
  job.cwd = std::filesystem::current_path(ec).string();
  job.argv = attempt_.options().command;
  // The first hosts' address first, then this host's other candidates (with the port).
  const std::string port = coordinator_address_.substr(coordinator_address_.rfind(':'));
  job.coordinator_addresses.push_back(coordinator_address_);
  for (const NetInterface& i : rank_candidates(own_, nullptr))
    if (i.address + port != coordinator_address_) job.coordinator_addresses.push_back(i.address + port);
  job.environment = [this](int id, const ElasticSlot& slot, bool spare,
                           const InterfaceChoice& choice, const std::string& coordinator) {
    return new_rank_environment(id, slot, spare, choice, coordinator);
  };
  job.start_agent = [this](const std::string& host) { return start_agent(host); };
  job.describe_exit = [this](const AgentLink& link) { return describe_exit(link); };
  job.version_problem = [this](const AgentLink& link) { return version_problem(link); };
  job.forced_interfaces = forced_;
  job.start_timeout = std::chrono::milliseconds(
      static_cast<int64_t>(settings_.get(setting::kStartTimeoutSeconds) * 1000.0));
  growth_ = std::make_unique<RemoteGrowth>(std::move(job), *runner_);
  for (size_t i = 0; i < agents_.size(); ++i) growth_->adopt(agents_[i]->host, i, choices_[i]);
  discovery_ = std::make_unique<DiscoveryThread>(
      elastic_.discovery_script, elastic_.slots_per_host,
      [runner = runner_.get(), this](Result<std::vector<HostSlots>> hosts) {
        runner->post_task([this, hosts = std::move(hosts)] {
          if (controller_) controller_->on_discovered(hosts);
        });
      });
}

void AgentStart::start_elastic_controller() {
  MultiHostRunner& runner = *runner_;
  ElasticRunnerSide side;
  side.records = [&runner]() -> std::vector<WorkerRecord>& { return runner.records(); };
  side.ending = [&runner] { return runner.tearing_down(); };
  side.say = [&runner](const std::string& text) { runner.say(text); };
  side.fail = [&runner](const std::string& text) { runner.post_control_plane_failure(text, -1); };
  if (!elastic_.discovery_script.empty()) {
    // Without a discovery script no host can come: short of --min-np the job fails at once.
    side.start = [this](const ElasticSlot& slot, bool spare) {
      return growth_ ? growth_->start(slot, spare) : -1;
    };
    side.hold = [&runner](bool held) { runner.links().hold(held); };
    side.stop = [this, &runner](int id) {
      // A rank whose host's agent is still starting was never sent: its start is ended.
      if (!(growth_ && growth_->cancel_waiting(id))) runner.links().stop_rank(id);
    };
    if (const RemoteHealth health = remote_health(settings_, hvrun_path_); health.options.enabled) {
      health_gate_ = std::make_unique<HealthGate>(
          health.command, health.deadline,
          [&runner](std::function<void()> task) { runner.post_task(std::move(task)); },
          [this](const std::string& host, const HealthVerdict& verdict) {
            if (controller_) controller_->on_host_checked(host, verdict.healthy, verdict.reason);
          });
      side.host_cleared = [this](const std::string& host, int slots) {
        return health_gate_->take_clearance(host, slots);
      };
    }
  }
  controller_ = std::make_unique<ElasticController>(elastic_, attempt_.elastic_hooks(),
                                                    std::move(side), runner.io());
}

int AgentStart::run() {
  MultiHostRunnerConfig config = attempt_.runner_config();
  if (elastic_.enabled) {
    // Ranks renumber at each reset: a launch-time rank's exit means nothing to a later
    // membership, and the membership change says what was lost. The controller hears every
    // exit (a clean one ends the training).
    config.coordinator.worker_exited = [this](int id, const std::string&) {
      runner_->post_task([this, id] {
        if (controller_) controller_->exited(id);
      });
    };
    config.absorb_failure = [this](const JobEnd&) { return controller_ && controller_->absorb(); };
  }
  runner_ = std::make_unique<MultiHostRunner>(std::move(config), attempt_.out(), attempt_.err());
  attempt_.supervise(*runner_);
  // The runner catches SIGINT and SIGTERM from now on: a signal while the agents start is its
  // to handle (the default action would kill hvrun without a word, the remote shells with it).
  if (!start_agents()) return 2;
  deadline_timer_.emplace(runner_->io());
  if (elastic_.enabled) start_elastic_controller();

  const int code = runner_->run(std::move(links_), *this);
  if (process_views_) process_views_->flush();  // an autopsy's report still waiting for agents
  discovery_.reset();
  health_gate_.reset();
  growth_.reset();
  controller_.reset();
  process_views_.reset();
  links_.clear();
  deadline_timer_.reset();
  agents_.clear();
  return code;
}

RemoteAgents::RemoteAgents() = default;
RemoteAgents::~RemoteAgents() = default;

int RemoteAgents::run(Attempt& attempt) {
  start_ = std::make_unique<AgentStart>(attempt);
  return start_->run();
}

void RemoteAgents::complete_autopsy(const v1::AutopsyJobReport& collected, AutopsyReport report) {
  start_->complete_autopsy(collected, std::move(report));
}

}  // namespace hvrun::launcher
