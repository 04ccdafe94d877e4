#include "launcher/remote/agent.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "common/build_info.h"
#include "common/proc_state.h"
#include "common/setting_keys.h"
#include "common/settings.h"
#include "launcher/plan/cpu_binding.h"
#include "launcher/plan/network_interfaces.h"
#include "launcher/plan/rank_environment.h"
#include "launcher/plan/slurm_allocation.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/process/shm_cleanup.h"
#include "launcher/process/worker_process.h"
#include "launcher/remote/agent_protocol.h"
#include "launcher/remote/reach_probe.h"
#include "launcher/supervisor/local_workers.h"
#include "launcher/supervisor/supervisor_loop.h"

namespace hvrun::launcher {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

constexpr std::chrono::milliseconds kProbeTimeout{2000};
// The coordinator is checked this often; this many failures in a row end the workers.
constexpr std::chrono::milliseconds kCoordinatorCheck{2000};
constexpr int kCoordinatorFailures = 3;
// Records never move (the workers' pipes point into them): an elastic job adds ranks to a running
// agent up to this many processes in all.
constexpr size_t kMostWorkers = 1024;

// The job's --grace-period, as its workers' environment carries it (a setting travels as its
// HVRUN_* variable when it is not at its default).
std::chrono::milliseconds job_grace_period(const std::vector<std::string>& worker_envp) {
  Settings settings;
  const std::string variable = std::string(find_setting(setting::kGracePeriodSeconds.name)->env);
  for (const std::string& kv : worker_envp)
    if (kv.size() > variable.size() && kv.compare(0, variable.size(), variable) == 0 &&
        kv[variable.size()] == '=')
      (void)settings.set(setting::kGracePeriodSeconds.name, kv.substr(variable.size() + 1),
                         SettingSource::kEnvironment, variable);
  return std::chrono::milliseconds(
      static_cast<int64_t>(settings.get(setting::kGracePeriodSeconds) * 1000.0));
}

// Whether hvrun started this worker in an elastic job (its environment says HVRUN_ELASTIC=1).
bool is_elastic_worker(const std::vector<std::string>& worker_envp) {
  return std::find(worker_envp.begin(), worker_envp.end(), "HVRUN_ELASTIC=1") != worker_envp.end();
}

// The agent's side of its workers' output and exits: frames to hvrun, nothing decided here
// (hvrun's supervisor judges the job; see supervisor/job_supervisor.h).
class Agent final : public RankOutput, public ChildrenEvents {
 public:
  int run();

  void begin(WorkerRecord&) override {}
  void write(int rank, int stream, std::string_view bytes) override {
    send(encode_frame("OUT", {std::to_string(rank), std::to_string(stream)}, bytes));
  }
  void end(int, int) override {}

  void exit_recorded(const WorkerRecord& w) override {
    send(encode_frame("EXIT", {std::to_string(w.rank), std::to_string(w.wait_status)}));
  }
  // An elastic job's worker began to die (its death watch): hvrun changes the membership at
  // once instead of after the exit, which the kernel's teardown of the process delays.
  void rank_dying(WorkerRecord& w, int wait_status) override {
    send(encode_frame("DYING", {std::to_string(w.rank), std::to_string(wait_status)}));
  }
  // Failures, start failures and losses are hvrun's to weigh, from the frames it gets.
  void rank_failed(const WorkerRecord&) override {}
  void start_failed(JobEnd) override {}
  void child_lost(JobEnd) override {}
  void say(const std::string& text) override { send(encode_frame("NOTE", {}, text)); }
  void progress() override { loop_->check_progress(); }

 private:
  bool send(const std::string& bytes);
  void on_job_frame(const Frame& f);
  void start_workers();
  // Starts workers_[i] with what hvrun sent for it; says STARTED or START_FAILED.
  void start_worker(size_t i);
  // A WORKER frame after START: an elastic job's new rank on this host, started at once.
  void add_worker(const Frame& f);
  // STOP RANK: an elastic job takes this rank's slot away (SIGTERM to its process group).
  void stop_worker(int rank);
  // PROCESSES: what /proc says of the processes named (an autopsy's ranks that did not answer).
  void answer_processes(const Frame& f);
  void sweep_shared_memory_on_exit();
  void read_stdin();
  void check_coordinator();
  void connection_lost(const std::string& why);
  void finish();

  std::optional<OrphanGuard> guard_;
  std::vector<WorkerRecord> workers_;
  std::vector<std::vector<std::string>> envps_;  // what hvrun sent for each worker
  std::vector<std::string> argv_;
  std::string cwd_;
  std::string coordinator_;
  std::vector<int> listeners_;  // probe listeners, until the job starts
  bool started_ = false;        // START came: the workers run under loop_
  bool lost_ = false;           // hvrun is gone: nothing more can be sent
  bool finished_ = false;
  int coordinator_failures_ = 0;

  asio::io_context io_;
  std::optional<SupervisorLoop> loop_;
  std::optional<LocalWorkers> local_;
  std::unique_ptr<asio::posix::stream_descriptor> stdin_;
  std::array<char, 65536> stdin_buffer_{};
  FrameReader reader_;
  std::unique_ptr<asio::steady_timer> coordinator_timer_;
};

bool Agent::send(const std::string& bytes) {
  if (lost_) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(1, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      lost_ = true;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

int Agent::run() {
  workers_.reserve(kMostWorkers);
  auto guard = OrphanGuard::start();  // while this process still has one thread
  if (guard.is_ok()) guard_.emplace(std::move(guard).value());
  send(encode_frame("HELLO", {}, std::string(build_info().version)));

  std::vector<NetInterface> interfaces = list_local_interfaces();
  listeners_ = open_probe_listeners(interfaces);
  for (const NetInterface& iface : interfaces)
    send(encode_frame("IFACE", {},
                      join_list({iface.name, iface.address, std::to_string(iface.probe_port),
                                 interface_flags(iface)})));
  send(encode_frame("IFACES_DONE"));
  stdin_ = std::make_unique<asio::posix::stream_descriptor>(io_, ::dup(0));
  read_stdin();
  io_.run();
  close_listeners(listeners_);
  if (guard_) guard_->release();
  // Without a job (hvrun went away or gave up before START) there is nothing to report.
  return lost_ || !started_ ? 1 : 0;
}

// Before START: the probes and the job's description. hvrun ending the start (KILL, SIGNAL)
// ends the agent.
void Agent::on_job_frame(const Frame& f) {
  if (f.type == "PROBE") {
    // Blocks this loop for at most kProbeTimeout: nothing else runs here before the job.
    for (const ProbeResult& r : probe_targets(split_list(f.payload), kProbeTimeout))
      send(encode_frame("PROBED", {r.target, r.reached ? "ok" : "fail"}, r.error));
    send(encode_frame("PROBES_DONE"));
  } else if (f.type == "CWD") {
    cwd_ = f.payload;
  } else if (f.type == "ARGV") {
    argv_ = split_list(f.payload);
  } else if (f.type == "WORKER") {
    WorkerRecord w;
    w.rank = static_cast<int>(f.int_arg(0));
    workers_.push_back(w);
    envps_.push_back(split_list(f.payload));
  } else if (f.type == "START") {
    coordinator_ = f.payload;
    close_listeners(listeners_);
    if (argv_.empty()) {
      io_.stop();
      return;
    }
    started_ = true;
    sweep_shared_memory_on_exit();
    start_workers();
  } else if (f.type == "KILL" || f.type == "SIGNAL") {
    io_.stop();
  }
}

// This host's segments of the job's shared-memory data plane, named
// /dev/shm/hvrun-shm-<job id>-<host>-<hash> (worker_lib/backends/shm/shm_segment.cc): the guard
// deletes what workers that died early left behind. The host part keeps hosts that share
// /dev/shm (network namespaces) out of each other's way.
void Agent::sweep_shared_memory_on_exit() {
  if (!guard_ || workers_.empty()) return;
  std::string job_id, host;
  for (const std::string& kv : envps_.front()) {
    if (kv.rfind("HVRUN_JOB_ID=", 0) == 0) job_id = kv.substr(13);
    if (kv.rfind("HVRUN_HOST=", 0) == 0) host = kv.substr(11);
  }
  if (job_id.empty() || host.empty()) return;
  std::string safe_host;  // as the worker library sanitises it (at most 80 characters)
  for (char c : host) {
    if (safe_host.size() >= 80) break;
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.';
    safe_host += keep ? c : '_';
  }
  guard_->sweep_on_exit(kShmDirectory, shm_segment_prefix(job_id) + safe_host + "-");
}

void Agent::start_workers() {
  loop_.emplace(io_, std::initializer_list<int>{SIGHUP, SIGTERM, SIGINT},
                SupervisorLoop::Hooks{
                    [this](int sig) {
                      connection_lost("the agent received signal " + std::to_string(sig));
                    },
                    [this] { local_->reap(); },
                    [] { return false; },  // an agent kills what its workers left at once
                    [this] { coordinator_timer_->cancel(); },
                    [this] { finish(); }});
  local_.emplace(io_, workers_, *this, *this, guard_ ? &*guard_ : nullptr,
                 job_grace_period(envps_.empty() ? std::vector<std::string>{} : envps_.front()));
  if (!envps_.empty() && is_elastic_worker(envps_.front())) local_->watch_for_dying();
  coordinator_timer_ = std::make_unique<asio::steady_timer>(io_);
  loop_->start(*local_);

  if (!cwd_.empty() && ::chdir(cwd_.c_str()) != 0)
    send(encode_frame("NOTE", {},
                      "cannot enter " + cwd_ + " (" + std::strerror(errno) +
                          "); workers start in the agent's directory"));
  for (size_t i = 0; i < workers_.size(); ++i) start_worker(i);
  local_->reap();
  check_coordinator();
  loop_->check_progress();
}

void Agent::start_worker(size_t i) {
  WorkerRecord& w = workers_[i];
  // The remote session's variables, overridden by what hvrun sends (which already left out
  // the launch host's HOSTNAME, SSH_*, ...).
  Environment env = current_process_environment();
  std::erase_if(env, [](const auto& kv) { return describes_slurm_task(kv.first); });
  for (const std::string& kv : envps_[i]) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto path_it = env.find("PATH");
  auto path = resolve_command(argv_[0], path_it == env.end() ? nullptr : path_it->second.c_str());
  const std::vector<std::string> envp = to_envp(env);
  Status started = path.is_ok() ? local_->start(i, *path, argv_, envp, binding_for_worker(envp))
                                : path.status();
  if (!started.is_ok()) {
    send(encode_frame("START_FAILED", {std::to_string(w.rank)}, started.message()));
    w.exited = true;
    return;
  }
  send(encode_frame("STARTED", {std::to_string(w.rank), std::to_string(w.pid)}));
}

void Agent::add_worker(const Frame& f) {
  const std::string rank = std::to_string(f.int_arg(0));
  if (finished_ || lost_) return;  // every worker ended: hvrun starts a new agent for more
  if (workers_.size() >= kMostWorkers) {
    send(encode_frame("START_FAILED", {rank},
                      "this host's agent has started " + std::to_string(workers_.size()) +
                          " workers, its most"));
    return;
  }
  WorkerRecord w;
  w.rank = static_cast<int>(f.int_arg(0));
  workers_.push_back(w);
  envps_.push_back(split_list(f.payload));
  start_worker(workers_.size() - 1);
  local_->reap();
  loop_->check_progress();
}

void Agent::stop_worker(int rank) {
  for (const WorkerRecord& w : workers_)
    if (w.rank == rank && w.pid > 0 && !w.exited) ::kill(-w.pid, SIGTERM);
}

void Agent::answer_processes(const Frame& f) {
  const std::string tag = f.args.empty() ? "0" : f.args[0];
  for (const std::string& word : split_list(f.payload)) {
    const pid_t pid = static_cast<pid_t>(std::atol(word.c_str()));
    send(encode_frame("PROCESS", {tag, std::to_string(pid)},
                      encode_process_snapshot(read_process_snapshot(pid))));
  }
  send(encode_frame("PROCESSES_DONE", {tag}));
}

void Agent::read_stdin() {
  stdin_->async_read_some(asio::buffer(stdin_buffer_), [this](error_code ec, size_t n) {
    if (n > 0) reader_.feed(std::string_view(stdin_buffer_.data(), n));
    while (true) {
      auto frame = reader_.next();
      if (!frame.is_ok()) {
        connection_lost(frame.status().message());
        return;
      }
      if (!frame->has_value()) break;
      const Frame& f = **frame;
      if (f.type == "PROCESSES") {
        answer_processes(f);
      } else if (!started_) {
        on_job_frame(f);
        if (io_.stopped()) return;
      } else if (f.type == "WORKER") {
        add_worker(f);
      } else if (f.type == "STOP") {
        stop_worker(static_cast<int>(f.int_arg(0)));
      } else if (f.type == "SIGNAL") {
        local_->signal_all(static_cast<int>(f.int_arg(0, SIGTERM)));
      } else if (f.type == "KILL") {
        local_->signal_all(SIGKILL);
      }
    }
    if (ec || n == 0) {
      connection_lost("the connection to hvrun closed");
      return;
    }
    read_stdin();
  });
}

void Agent::check_coordinator() {
  // Only a TCP coordinator can be dialled from here ("ADDR:PORT").
  if (coordinator_.empty() || coordinator_.rfind("unix:", 0) == 0) return;
  coordinator_timer_->expires_after(kCoordinatorCheck);
  coordinator_timer_->async_wait([this](error_code ec) {
    if (ec) return;
    // Blocks this loop for at most 1 s, and only while the coordinator does not answer.
    auto result = probe_targets({coordinator_}, std::chrono::milliseconds(1000));
    coordinator_failures_ = result.at(0).reached ? 0 : coordinator_failures_ + 1;
    if (coordinator_failures_ >= kCoordinatorFailures) {
      send(encode_frame("NOTE", {},
                        "the coordinator at " + coordinator_ + " stopped answering (" +
                            result.at(0).error + "): killing this host's workers"));
      local_->signal_all(SIGKILL);
      return;
    }
    check_coordinator();
  });
}

void Agent::connection_lost(const std::string& why) {
  if (!started_) {  // hvrun went away before the job started: nothing runs here
    io_.stop();
    return;
  }
  if (!lost_ && !finished_)  // stderr reaches hvrun (through ssh) only if it is still there
    std::fprintf(stderr, "hvrun agent: %s: killing this host's workers\n", why.c_str());
  lost_ = true;
  local_->signal_all(SIGKILL);
  loop_->check_progress();
}

void Agent::finish() {
  finished_ = true;
  coordinator_timer_->cancel();
  error_code ignored;
  stdin_->close(ignored);
  send(encode_frame("BYE"));
}

}  // namespace

int run_agent(const std::vector<std::string>& args) {
  (void)args;
  ::signal(SIGPIPE, SIG_IGN);
  Agent agent;
  return agent.run();
}

}  // namespace hvrun::launcher
