#include "launcher/supervisor/supervisor_loop.h"

#include <signal.h>

namespace hvrun::launcher {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
// While waiting for process groups to empty during a teardown (they cannot be waited on).
constexpr std::chrono::milliseconds kLeftoverPoll{20};
}  // namespace

SupervisorLoop::SupervisorLoop(asio::io_context& io, std::initializer_list<int> stop_signals,
                               Hooks hooks)
    : io_(io), hooks_(std::move(hooks)), stop_signals_(io), child_signal_(io, SIGCHLD),
      leftover_poll_(io), drain_timer_(io) {
  for (int sig : stop_signals) stop_signals_.add(sig);
}

void SupervisorLoop::start(Children& children) {
  children_ = &children;
  wait_stop_signals();
  wait_child_signal();
}

void SupervisorLoop::wait_stop_signals() {
  stop_signals_.async_wait([this](error_code ec, int sig) {
    if (ec) return;
    hooks_.stop_signal(sig);
    wait_stop_signals();
  });
}

void SupervisorLoop::wait_child_signal() {
  child_signal_.async_wait([this](error_code ec, int) {
    if (ec) return;
    hooks_.child_exited();
    check_progress();
    wait_child_signal();
  });
}

void SupervisorLoop::check_progress() {
  if (finished_ || children_ == nullptr || children_->running()) return;
  if (!leftovers_settled_) {
    if (!children_->settle_leftovers(hooks_.leftovers_may_stop())) {
      if (!polling_) {
        polling_ = true;
        leftover_poll_.expires_after(kLeftoverPoll);
        leftover_poll_.async_wait([this](error_code ec) {
          polling_ = false;
          if (!ec) check_progress();
        });
      }
      return;
    }
    leftovers_settled_ = true;
    leftover_poll_.cancel();
    hooks_.all_exited();
    drain_timer_.expires_after(kOutputDrainLimit);
    drain_timer_.async_wait([this](error_code ec) {
      if (ec) return;
      children_->close_output();
      check_progress();
    });
  }
  if (children_->output_open()) return;
  children_->close_output();
  finish();
}

void SupervisorLoop::finish() {
  if (finished_) return;
  finished_ = true;
  drain_timer_.cancel();
  leftover_poll_.cancel();
  stop_signals_.cancel();
  child_signal_.cancel();
  hooks_.finished();
  io_.stop();
}

}  // namespace hvrun::launcher
