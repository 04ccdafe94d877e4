// The launcher's one event loop, shared by single-host jobs, multi-host jobs and the per-host
// agents: a Boost.Asio io_context on the calling thread with the stop signals, SIGCHLD, and the
// end of a job — once every child exited, what they left running is settled, their output
// drains (at most kOutputDrainLimit), and the loop stops.
//
// What the signals mean and what a failure does is the owner's (job_supervisor.h for hvrun,
// remote/agent.cc for an agent), through Hooks. Threads: the loop's thread only.
#pragma once

#include <functional>
#include <initializer_list>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/supervisor/children.h"

namespace hvrun::launcher {

class SupervisorLoop {
 public:
  struct Hooks {
    std::function<void(int)> stop_signal;      // one of the stop signals arrived
    std::function<void()> child_exited;        // SIGCHLD (the loop checks progress after it)
    std::function<bool()> leftovers_may_stop;  // what children left may still stop by itself
    std::function<void()> all_exited;          // every child exited and leftovers are settled
    std::function<void()> finished;            // output drained; the loop stops right after
  };

  // Watches `stop_signals` from now on (a signal that arrives before start() waits for it).
  SupervisorLoop(boost::asio::io_context& io, std::initializer_list<int> stop_signals,
                 Hooks hooks);
  SupervisorLoop(const SupervisorLoop&) = delete;
  SupervisorLoop& operator=(const SupervisorLoop&) = delete;

  // Begins delivering signals and SIGCHLD for `children`.
  void start(Children& children);
  // Ends the loop when the job is over (see the top); cheap, call after anything that ended.
  void check_progress();

 private:
  void wait_stop_signals();
  void wait_child_signal();
  void finish();

  boost::asio::io_context& io_;
  Hooks hooks_;
  Children* children_ = nullptr;
  boost::asio::signal_set stop_signals_;
  boost::asio::signal_set child_signal_;
  boost::asio::steady_timer leftover_poll_;
  boost::asio::steady_timer drain_timer_;
  bool polling_ = false;
  bool leftovers_settled_ = false;
  bool finished_ = false;
};

}  // namespace hvrun::launcher
