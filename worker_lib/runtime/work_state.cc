#include "worker_lib/runtime/work_state.h"

#include <chrono>

namespace hvrun::detail {
namespace {

constexpr std::chrono::seconds kAbortReasonWait{3};

}  // namespace

void WorkState::terminate(Status status) {
  std::vector<std::shared_ptr<PendingOp>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (terminal) return;
    terminal = status;
    failed = in_flight.take_all();
    outbox.clear();
  }
  for (const auto& op : failed) op->handle->complete(status);
}

bool WorkState::request_abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (terminal || abort_reason) return false;
    abort_reason = reason;
  }
  wake.notify_all();
  return true;
}

void WorkState::request_stop(Status refusal) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    terminal = std::move(refusal);
    stop_requested = true;
  }
  wake.notify_all();
}

Status WorkState::explain_failure(Status failed) {
  // A collective fails when a peer dies; the coordinator learns it too and says who (its
  // JobAbort, which the reader turns into `terminal`). Give that a moment to arrive.
  std::unique_lock<std::mutex> lock(mutex);
  if (terminal && terminal->code() == StatusCode::kAborted) {
    if (failed.code() == StatusCode::kAborted) return *terminal;  // the teardown's own words
  } else if (failed.code() == StatusCode::kAborted) {
    return failed;  // torn down by a JobAbort this thread has yet to handle: carries its reason
  } else {
    wake.wait_for(lock, kAbortReasonWait, [&] { return terminal.has_value() || stream_ended; });
    if (!terminal || terminal->code() != StatusCode::kAborted) return failed;
  }
  return Status(StatusCode::kAborted, terminal->message() + " (data plane: " + failed.message() + ")");
}

}  // namespace hvrun::detail
