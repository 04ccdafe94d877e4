// An autopsy of a job on several hosts: the ranks that did not answer may run where only their
// host's agent can read /proc. Each such host's agent is asked (agent_protocol.h PROCESSES) for
// the state of its silent ranks' processes; what comes back within the deadline is filled into
// the report, and a host whose agent is gone or too slow gets a note saying so. The report then
// goes on to `done` (launcher/autopsy/autopsy_reporter.h prints and writes it).
//
// Threads: the job supervisor's loop (the agents' frames are read there).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "hvrun.pb.h"
#include "launcher/remote/agent_protocol.h"

namespace hvrun::launcher {

class AgentProcessViews {
 public:
  // Sends a frame to `host`'s agent; false when it has none running.
  using Send = std::function<bool(const std::string& host, const std::string& frame)>;
  using Done = std::function<void(const v1::AutopsyJobReport&)>;

  AgentProcessViews(boost::asio::io_context& io, Send send, std::chrono::milliseconds deadline);

  // Asks the agents for `report`'s silent ranks; `done` gets the report once every agent asked
  // answered, the deadline passed, or flush() was called.
  void fill(v1::AutopsyJobReport report, Done done);
  // An agent's PROCESS or PROCESSES_DONE frame.
  void on_reply(const std::string& host, const Frame& f);
  // The job is over: every report still waiting goes on now, its silent hosts noted.
  void flush();

 private:
  struct Request {
    v1::AutopsyJobReport report;
    Done done;
    std::set<std::string> waiting;  // hosts asked that have not answered
    std::unique_ptr<boost::asio::steady_timer> timer;
  };

  // `why` is noted on the ranks of the hosts still waiting; the request ends.
  void finish(int tag, const std::string& why);

  boost::asio::io_context& io_;
  Send send_;
  const std::chrono::milliseconds deadline_;
  std::map<int, Request> requests_;
  int next_tag_ = 1;
};

}  // namespace hvrun::launcher
