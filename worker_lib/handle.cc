#include "hvrun/handle.h"

#include "worker_lib/handle_state.h"

namespace hvrun {

namespace detail {
void HandleState::complete(Status final_status) {
  std::vector<std::function<void(const Status&)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (done.load(std::memory_order_relaxed)) return;
    status = std::move(final_status);
    done.store(true, std::memory_order_release);
    callbacks.swap(on_complete);
  }
  done_cv.notify_all();
  // status is final once done is set, so reading it without the lock is safe here.
  for (auto& callback : callbacks) callback(status);
}
}  // namespace detail

namespace {
const std::string kEmptyName;
}

const std::string& Handle::name() const { return state_ ? state_->name : kEmptyName; }

bool Handle::poll() const {
  return !state_ || state_->done.load(std::memory_order_acquire);
}

void Handle::count_wait_since(std::chrono::steady_clock::time_point since) const {
  if (state_ && state_->blocked) state_->blocked->add(since, detail::BlockedTime::Clock::now());
}

Status Handle::wait(std::chrono::milliseconds timeout) const {
  if (!state_) return failed_precondition("wait on an empty hvrun::Handle");
  if (state_->done.load(std::memory_order_acquire)) return state_->status;
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (state_->done) return state_->status;
  // Blocked time (blocked_time.h): read the clock only when the wait really blocks.
  const auto start = detail::BlockedTime::Clock::now();
  const bool done = state_->done_cv.wait_for(lock, timeout, [&] { return state_->done.load(); });
  if (state_->blocked) state_->blocked->add(start, detail::BlockedTime::Clock::now());
  if (!done) {
    return deadline_exceeded("collective '" + state_->name + "' did not complete within " +
                             std::to_string(timeout.count()) +
                             " ms (still running; some rank may not have submitted it yet)");
  }
  return state_->status;
}

void Handle::on_complete(std::function<void(const Status&)> callback) const {
  if (!state_) {
    callback(failed_precondition("on_complete on an empty hvrun::Handle"));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->done) {
      state_->on_complete.push_back(std::move(callback));
      return;
    }
  }
  callback(state_->status);
}

Status Handle::status() const {
  if (!state_) return failed_precondition("status of an empty hvrun::Handle");
  if (!state_->done.load(std::memory_order_acquire))
    return failed_precondition("collective '" + state_->name + "' is still running");
  return state_->status;
}

TensorView Handle::output() const {
  if (!poll() || !state_) return {};
  return state_->output.view();
}

OwnedTensor Handle::output_tensor() const {
  if (!poll() || !state_) return {};
  return state_->output;  // host bytes copied; CUDA memory shared
}

std::vector<int64_t> Handle::received_splits() const {
  if (!poll() || !state_) return {};
  return state_->received_splits;
}

int Handle::join_result() const {
  if (!poll() || !state_) return -1;
  return state_->join_result;
}

std::vector<int> Handle::joined_ranks() const {
  if (!poll() || !state_) return {};
  return state_->joined_ranks;
}

}  // namespace hvrun
