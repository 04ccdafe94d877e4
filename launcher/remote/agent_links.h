// The agents of a multi-host job as a supervisor's children (supervisor/children.h), once their
// START was sent: their frames (the ranks' output, starts and exits, notes, BYE) are read and
// acted on, their remote shells reaped, and the teardown goes to them as SIGNAL and KILL frames;
// remote shells still running kShellKillAfterGrace after the KILL are killed, which makes their
// agents kill their workers. An agent whose remote shell ended before its BYE (host down, agent
// killed, ssh session cut) is lost: its ranks' fate is unknown, and that ends the job.
//
// A reaped remote shell's last frames (its agent's BYE among them) may still be in the pipe, or
// read but not yet handled: its link is judged only once its frame stream has ended, or
// kOutputDrainLimit later if something else still holds the pipe open.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/remote/agent_link.h"
#include "launcher/supervisor/children.h"

namespace hvrun::launcher {

class AgentLinks final : public Children {
 public:
  // `records` is indexed by rank; `link_of_rank[r]` is the index (into the links given to
  // start()) of rank r's agent. `verbose`: the remote shells' stderr lines are shown.
  AgentLinks(boost::asio::io_context& io, std::vector<WorkerRecord>& records,
             std::vector<size_t> link_of_rank, RankOutput& output, ChildrenEvents& events,
             bool verbose);
  ~AgentLinks() override;

  // Takes the links over and starts reading them (frames already read are handled first).
  void start(std::vector<AgentLink> links);

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
    bool judged = false;  // its end has been weighed (on_link_end)
    std::unique_ptr<boost::asio::steady_timer> eof_wait;
    std::string err_line;  // partial stderr line of the remote shell
  };

  void read_frames(size_t index);
  // Feeds `n` bytes of a link's frame stream to its reader and acts on each whole frame; false
  // when the stream is malformed (said).
  bool feed_frames(size_t index, const char* data, size_t n);
  void close_frames(size_t index);
  void read_shell_err(size_t index);
  void on_frame(size_t index, const Frame& f);
  void on_worker_exit(int rank, int wait_status);
  void on_link_exit(size_t index);
  void on_link_end(size_t index);
  void send_all(const std::string& frame);
  WorkerRecord* record(long long rank);

  boost::asio::io_context& io_;
  std::vector<WorkerRecord>& records_;
  std::vector<size_t> link_of_rank_;
  RankOutput& output_;
  ChildrenEvents& events_;
  const bool verbose_;
  std::vector<std::unique_ptr<Link>> links_;
  boost::asio::steady_timer shell_timer_;
  bool closed_ = false;
};

}  // namespace hvrun::launcher
