// The shared state behind a Handle. Written once by the worker's background thread (complete),
// read by any thread. Guarded by `mutex`, except that `done` may be read without it: once it
// reads true, the status and outputs are final and visible.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "worker_lib/blocked_time.h"
#include "hvrun/types.h"

namespace hvrun::detail {

struct HandleState {
  explicit HandleState(std::string n) : name(std::move(n)) {}

  const std::string name;

  std::mutex mutex;
  std::condition_variable done_cv;
  // Set under mutex, after everything below: a step's waits on handles done already (most of
  // them) read it without taking the mutex.
  std::atomic<bool> done{false};
  Status status;                 // guarded by mutex; final once done
  // Outputs, written by the background thread before done is set.
  OwnedTensor output;
  std::vector<int64_t> received_splits;
  int join_result = -1;
  std::vector<int> joined_ranks;  // ranks that had joined when the operation ran
  // Handle::on_complete callbacks waiting for completion; guarded by mutex, run (outside it)
  // by complete().
  std::vector<std::function<void(const Status&)>> on_complete;
  // Where a wait on this handle that blocks counts its time (null: nowhere). Set at submission.
  std::shared_ptr<BlockedTime> blocked;

  // Sets the final status (first call wins), wakes waiters and runs the on_complete callbacks.
  void complete(Status final_status);
  // As new, for the next collective of the same name; only by the state's sole holder
  // (InFlightTable::claim), so nothing else reads it meanwhile.
  void reset_for_reuse() {
    done.store(false, std::memory_order_relaxed);
    status = Status::ok();
    output = OwnedTensor{};
    received_splits.clear();
    join_result = -1;
    joined_ranks.clear();
    on_complete.clear();
    blocked.reset();
  }

  static std::shared_ptr<HandleState> failed(std::string name, Status status) {
    auto state = std::make_shared<HandleState>(std::move(name));
    state->complete(std::move(status));
    return state;
  }
};

}  // namespace hvrun::detail
