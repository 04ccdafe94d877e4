#include "launcher/remote/agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "common/build_info.h"
#include "launcher/remote/agent_protocol.h"
#include "launcher/plan/cpu_binding.h"
#include "launcher/plan/network_interfaces.h"
#include "launcher/process/orphan_guard.h"
#include "launcher/process/process_group.h"
#include "launcher/plan/rank_environment.h"
#include "launcher/remote/reach_probe.h"
#include "launcher/process/shm_cleanup.h"
#include "launcher/process/worker_process.h"

namespace hvrun::launcher {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

constexpr std::chrono::milliseconds kProbeTimeout{2000};
// The coordinator is checked this often; this many failures in a row end the workers.
constexpr std::chrono::milliseconds kCoordinatorCheck{2000};
constexpr int kCoordinatorFailures = 3;
constexpr std::chrono::milliseconds kDrainLimit{1000};

struct AgentWorker {
  int rank = 0;
  std::vector<std::string> envp;
  pid_t pid = -1;
  bool exited = false;
};

class Agent {
 public:
  int run();

 private:
  bool send(const std::string& bytes);
  bool receive_job();
  void start_workers();
  void sweep_shared_memory_on_exit();
  void read_stdin();
  void read_pipe(size_t index);
  void wait_children();
  void wait_signals();
  void check_coordinator();
  void reap();
  void connection_lost(const std::string& why);
  void kill_all(int sig);
  void check_done();
  void finish();

  std::optional<OrphanGuard> guard_;
  std::vector<AgentWorker> workers_;
  std::vector<std::string> argv_;
  std::string cwd_;
  std::string coordinator_;
  bool lost_ = false;  // hvrun is gone: nothing more can be sent
  bool leftovers_done_ = false;
  bool finished_ = false;
  int coordinator_failures_ = 0;

  asio::io_context io_;
  struct Pipe {
    int rank = 0;
    int stream = 1;  // 1 stdout, 2 stderr
    std::unique_ptr<asio::posix::stream_descriptor> fd;
    std::array<char, 65536> buffer{};
    bool open = false;
  };
  std::vector<std::unique_ptr<Pipe>> pipes_;
  std::unique_ptr<asio::posix::stream_descriptor> stdin_;
  std::array<char, 65536> stdin_buffer_{};
  FrameReader reader_;
  std::unique_ptr<asio::signal_set> child_signal_;
  std::unique_ptr<asio::signal_set> stop_signals_;
  std::unique_ptr<asio::steady_timer> coordinator_timer_;
  std::unique_ptr<asio::steady_timer> drain_timer_;
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
  auto guard = OrphanGuard::start();  // while this process still has one thread
  if (guard.is_ok()) guard_.emplace(std::move(guard).value());
  send(encode_frame("HELLO", {}, std::string(build_info().version)));

  std::vector<NetInterface> interfaces = list_local_interfaces();
  std::vector<int> listeners = open_probe_listeners(interfaces);
  for (const NetInterface& iface : interfaces)
    send(encode_frame("IFACE", {},
                      join_list({iface.name, iface.address, std::to_string(iface.probe_port),
                                 interface_flags(iface)})));
  send(encode_frame("IFACES_DONE"));
  bool job = receive_job();
  close_listeners(listeners);
  if (!job) {
    if (guard_) guard_->release();
    return 1;
  }
  sweep_shared_memory_on_exit();
  start_workers();
  io_.run();
  if (guard_) guard_->release();
  return lost_ ? 1 : 0;
}

// Phase 1, blocking: probes and the job description, until START (true) or end of input.
bool Agent::receive_job() {
  std::array<char, 65536> buffer{};
  while (true) {
    auto frame = reader_.next();
    if (!frame.is_ok()) return false;
    if (!frame->has_value()) {
      ssize_t n = ::read(0, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;  // hvrun went away before the job started
      reader_.feed(std::string_view(buffer.data(), static_cast<size_t>(n)));
      continue;
    }
    const Frame& f = **frame;
    if (f.type == "PROBE") {
      for (const ProbeResult& r : probe_targets(split_list(f.payload), kProbeTimeout))
        send(encode_frame("PROBED", {r.target, r.reached ? "ok" : "fail"}, r.error));
      send(encode_frame("PROBES_DONE"));
    } else if (f.type == "CWD") {
      cwd_ = f.payload;
    } else if (f.type == "ARGV") {
      argv_ = split_list(f.payload);
    } else if (f.type == "WORKER") {
      workers_.push_back(AgentWorker{static_cast<int>(f.int_arg(0)), split_list(f.payload)});
    } else if (f.type == "START") {
      coordinator_ = f.payload;
      return !argv_.empty();
    } else if (f.type == "KILL" || f.type == "SIGNAL") {
      return false;
    }
  }
}

// This host's segments of the job's shared-memory data plane, named
// /dev/shm/hvrun-shm-<job id>-<host>-<hash> (worker_lib/backends/shm/shm_segment.cc): the guard
// deletes what workers that died early left behind. The host part keeps hosts that share
// /dev/shm (network namespaces) out of each other's way.
void Agent::sweep_shared_memory_on_exit() {
  if (!guard_ || workers_.empty()) return;
  std::string job_id, host;
  for (const std::string& kv : workers_.front().envp) {
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
  child_signal_ = std::make_unique<asio::signal_set>(io_, SIGCHLD);
  stop_signals_ = std::make_unique<asio::signal_set>(io_, SIGHUP, SIGTERM, SIGINT);
  coordinator_timer_ = std::make_unique<asio::steady_timer>(io_);
  drain_timer_ = std::make_unique<asio::steady_timer>(io_);
  stdin_ = std::make_unique<asio::posix::stream_descriptor>(io_, ::dup(0));
  wait_children();
  wait_signals();
  read_stdin();

  if (!cwd_.empty() && ::chdir(cwd_.c_str()) != 0)
    send(encode_frame("NOTE", {},
                      "cannot enter " + cwd_ + " (" + std::strerror(errno) +
                          "); workers start in the agent's directory"));
  const Environment own = current_process_environment();
  for (AgentWorker& w : workers_) {
    // The remote session's variables, overridden by what hvrun sends (which already left out
    // the launch host's HOSTNAME, SSH_*, ...).
    Environment env = own;
    for (const std::string& kv : w.envp) {
      size_t eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    auto path_it = env.find("PATH");
    auto path = resolve_command(argv_[0], path_it == env.end() ? nullptr : path_it->second.c_str());
    const std::vector<std::string> envp = to_envp(env);
    Result<SpawnedWorker> spawned =
        path.is_ok() ? spawn_worker(*path, argv_, envp, false, binding_for_worker(envp))
                     : Result<SpawnedWorker>(path.status());
    if (!spawned.is_ok()) {
      send(encode_frame("START_FAILED", {std::to_string(w.rank)}, spawned.status().message()));
      w.exited = true;
      continue;
    }
    w.pid = spawned->pid;
    if (guard_) guard_->watch(w.pid);
    send(encode_frame("STARTED", {std::to_string(w.rank), std::to_string(w.pid)}));
    int fds[2] = {spawned->stdout_fd, spawned->stderr_fd};
    for (int k = 0; k < 2; ++k) {
      auto pipe = std::make_unique<Pipe>();
      pipe->rank = w.rank;
      pipe->stream = k + 1;
      pipe->fd = std::make_unique<asio::posix::stream_descriptor>(io_, fds[k]);
      pipe->open = true;
      pipes_.push_back(std::move(pipe));
      read_pipe(pipes_.size() - 1);
    }
  }
  reap();
  check_coordinator();
  check_done();
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
      if (f.type == "SIGNAL")
        kill_all(static_cast<int>(f.int_arg(0, SIGTERM)));
      else if (f.type == "KILL")
        kill_all(SIGKILL);
    }
    if (ec || n == 0) {
      connection_lost("the connection to hvrun closed");
      return;
    }
    read_stdin();
  });
}

void Agent::read_pipe(size_t index) {
  Pipe& pipe = *pipes_[index];
  pipe.fd->async_read_some(asio::buffer(pipe.buffer), [this, index](error_code ec, size_t n) {
    Pipe& p = *pipes_[index];
    if (n > 0)
      send(encode_frame("OUT", {std::to_string(p.rank), std::to_string(p.stream)},
                        std::string_view(p.buffer.data(), n)));
    if (ec || n == 0) {
      if (!p.open) return;
      p.open = false;
      error_code ignored;
      p.fd->close(ignored);
      check_done();
      return;
    }
    read_pipe(index);
  });
}

void Agent::wait_children() {
  child_signal_->async_wait([this](error_code ec, int) {
    if (ec) return;
    reap();
    check_done();
    wait_children();
  });
}

void Agent::wait_signals() {
  stop_signals_->async_wait([this](error_code ec, int sig) {
    if (ec) return;
    connection_lost("the agent received signal " + std::to_string(sig));
    wait_signals();
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
      kill_all(SIGKILL);
      return;
    }
    check_coordinator();
  });
}

void Agent::reap() {
  for (AgentWorker& w : workers_) {
    if (w.pid <= 0 || w.exited) continue;
    int status = 0;
    pid_t got;
    do {
      got = ::waitpid(w.pid, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    if (got != w.pid) continue;
    w.exited = true;
    send(encode_frame("EXIT", {std::to_string(w.rank), std::to_string(status)}));
  }
}

void Agent::connection_lost(const std::string& why) {
  if (!lost_ && !finished_)  // stderr reaches hvrun (through ssh) only if it is still there
    std::fprintf(stderr, "hvrun agent: %s: killing this host's workers\n", why.c_str());
  lost_ = true;
  kill_all(SIGKILL);
  check_done();
}

void Agent::kill_all(int sig) {
  for (const AgentWorker& w : workers_)
    if (w.pid > 0) signal_group(w.pid, sig);
}

void Agent::check_done() {
  for (const AgentWorker& w : workers_)
    if (w.pid > 0 && !w.exited) return;
  if (!leftovers_done_) {
    leftovers_done_ = true;
    // Whatever the workers left running in their groups would outlive the job.
    for (const AgentWorker& w : workers_)
      if (w.pid > 0 && group_has_live_members(w.pid)) ::kill(-w.pid, SIGKILL);
    coordinator_timer_->cancel();
    drain_timer_->expires_after(kDrainLimit);
    drain_timer_->async_wait([this](error_code ec) {
      if (!ec) finish();
    });
  }
  for (const auto& p : pipes_)
    if (p->open) return;
  finish();
}

void Agent::finish() {
  if (finished_) return;
  finished_ = true;
  drain_timer_->cancel();
  coordinator_timer_->cancel();
  child_signal_->cancel();
  stop_signals_->cancel();
  error_code ignored;
  stdin_->close(ignored);
  send(encode_frame("BYE"));
  io_.stop();
}

}  // namespace

int run_agent(const std::vector<std::string>& args) {
  (void)args;
  ::signal(SIGPIPE, SIG_IGN);
  Agent agent;
  return agent.run();
}

}  // namespace hvrun::launcher
