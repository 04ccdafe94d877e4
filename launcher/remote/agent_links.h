// The agents of a multi-host job as a supervisor's children (supervisor/children.h), read on the
// launcher's event loop from the moment they are started.
//
// Before the job starts, what the agents say (HELLO, interfaces, probe results) is recorded in
// their AgentLink and the pre-start's owner is told (PreStartHooks); an agent that ends, or
// sends garbage, gets its `failure` set. From job_started() on, their frames (the ranks'
// output, starts and exits, notes, BYE) are acted on, their remote shells reaped, and the
// teardown goes to them as SIGNAL and KILL frames; remote shells still running
// kShellKillAfterGrace after the KILL are killed, which makes their agents kill their workers.
// An agent whose remote shell ended before its BYE (host down, agent killed, ssh session cut) is
// lost: its ranks' fate is unknown, and that ends the job.
//
// A reaped remote shell's last frames (its agent's BYE among them) and last words on stderr may
// still be in the pipes, or read but not yet handled: its link is judged only once both streams
// have ended, or kOutputDrainLimit later if something else still holds a pipe open.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/remote/agent_link.h"
#include "launcher/supervisor/children.h"

namespace hvrun::launcher {

// What the owner of a job's start hears from the links until job_started(), and the owner of an
// agent added later (add()) from that one until link_started().
struct PreStartHooks {
  std::function<void()> progress;  // a link said something, or failed
  // The `failure` of a link whose agent ended before its job started.
  std::function<std::string(const AgentLink&)> describe_exit;
};

class AgentLinks final : public Children {
 public:
  // `records` is indexed by rank (sized by job_started()). `verbose`: the remote shells' stderr
  // lines are shown.
  AgentLinks(boost::asio::io_context& io, std::vector<WorkerRecord>& records, RankOutput& output,
             ChildrenEvents& events, bool verbose);
  ~AgentLinks() override;

  // Takes the links over and starts reading them.
  void start(std::vector<AgentLink> links, PreStartHooks hooks);
  // The links, in the order given to start().
  std::vector<AgentLink*> agents();
  // Every agent is about to get its job: `link_of_rank[r]` is the index of rank r's agent.
  void job_started(std::vector<size_t> link_of_rank);
  // The job will not start: every agent is ended now.
  void abandon();

  // A running elastic job's growth: an agent started later (a new host, or one whose agent
  // ended) is read from now on and heard by `hooks` until link_started(); returns its index.
  size_t add(AgentLink link, PreStartHooks hooks);
  // Link `index` has been sent its job: its frames now speak of ranks.
  void link_started(size_t index);
  // Rank `rank` (a record just added) runs on link `index`.
  void add_rank(int rank, size_t index);
  // Whether link `index` still takes new ranks (started, its agent running and not saying BYE).
  bool takes_ranks(size_t index) const;
  AgentLink& agent(size_t index) { return links_.at(index)->agent; }
  // Keeps the job "running" while no agent runs (an elastic job waiting for hosts).
  void hold(bool held) { held_ = held; }

  // Frames that answer hvrun's requests (PROCESS, PROCESSES_DONE) go to `replies`, with the
  // host of the agent that sent them.
  void on_replies(std::function<void(const std::string& host, const Frame&)> replies) {
    replies_ = std::move(replies);
  }
  // Asks rank `rank`'s agent to stop it (SIGTERM to its process group); false when its agent is
  // gone.
  bool stop_rank(int rank);
  // Sends `frame` to the agent of `host` that has its job and runs; false when there is none.
  bool send_to(const std::string& host, const std::string& frame);

  WorkerRecord* reap() override;  // reaps remote shells; ranks report their exits in frames
  // Always: a lost agent explains everything else (the coordinator sees the host's workers'
  // streams drop, and the other ranks fail on the abort, before hvrun sees the shell end).
  bool awaits_explanation(const JobEnd& end) const override;
  void signal_all(int sig) override;
  void grace_over() override;
  void kill_now(int sig) override;
  bool running() const override;
  bool settle_leftovers(bool may_wait) override;
  bool output_open() const override;
  void close_output() override;

 private:
  struct Link {
    AgentLink agent;
    std::unique_ptr<boost::asio::posix::stream_descriptor> out, err;
    std::array<char, 65536> out_buffer{}, err_buffer{};
    bool out_open = false, err_open = false;
    bool bye = false;
    bool started = false;  // its job was sent: its frames speak of ranks
    bool judged = false;   // its end has been weighed (on_link_end)
    PreStartHooks hooks;   // what hears it before it starts
    std::unique_ptr<boost::asio::steady_timer> eof_wait;
    std::string err_line;  // partial stderr line of the remote shell
  };

  void read_frames(size_t index);
  // Feeds `n` bytes of a link's frame stream to its reader and acts on each whole frame; false
  // when the stream is malformed (said).
  bool feed_frames(size_t index, const char* data, size_t n);
  void close_frames(size_t index);
  void read_shell_err(size_t index);
  void close_shell_err(size_t index);
  void on_frame(size_t index, const Frame& f);
  void on_prestart_end(size_t index);
  void on_worker_exit(int rank, int wait_status);
  void on_link_exit(size_t index);
  void on_link_end(size_t index);
  void send_all(const std::string& frame);
  WorkerRecord* record(long long rank);

  boost::asio::io_context& io_;
  std::vector<WorkerRecord>& records_;
  std::vector<size_t> link_of_rank_;
  bool job_started_ = false;
  RankOutput& output_;
  ChildrenEvents& events_;
  const bool verbose_;
  std::vector<std::unique_ptr<Link>> links_;
  boost::asio::steady_timer shell_timer_;
  bool closed_ = false;
  bool held_ = false;
  std::function<void(const std::string& host, const Frame&)> replies_;
};

}  // namespace hvrun::launcher
