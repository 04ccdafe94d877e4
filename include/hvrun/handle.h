// Handle: the caller's side of one queued collective (poll, bounded wait, status, output).
//
// Handles are cheap to copy (they share one state); any thread may poll or wait on them. A
// handle completes exactly once, on the worker's background thread (hvrun-loop; see the thread
// list in hvrun/hvrun.h; a fast-path allreduce's on the caller's thread), either with OK (outputs
// written) or with the error that stopped it: the coordinator's mismatch message
// (kInvalidArgument), kAborted with the job's abort reason, kCancelled at shutdown, kInternal
// when the data plane failed. Waiting never blocks past the timeout given.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hvrun/status.h"
#include "hvrun/types.h"

namespace hvrun {

namespace detail {
struct HandleState;
}

class Handle {
 public:
  Handle() = default;  // an empty handle: valid() is false
  explicit Handle(std::shared_ptr<detail::HandleState> state) : state_(std::move(state)) {}

  bool valid() const { return state_ != nullptr; }
  const std::string& name() const;

  // True once the operation finished (successfully or not). Never blocks.
  bool poll() const;

  // Waits at most `timeout` for completion. Returns the operation's status when it completed,
  // or kDeadlineExceeded (naming the tensor) when it is still running; the operation keeps
  // going and can be waited on again.
  Status wait(std::chrono::milliseconds timeout) const;

  // Runs `callback` with the final status once the operation finished: on the thread that
  // completes it when it completes later (the worker's background thread; for CUDA tensors of
  // the global process set, the GPU executor's completion thread, hvrun-gpu-done, which finishes
  // responses when the GPU did), at once on the calling thread when it already had. Outputs are readable from the callback. The callback holds up every other collective
  // while it runs, so it must not block: frameworks hand the rest of their work to a thread of
  // their own (an asynchronous op kernel schedules its completion). An empty handle calls it at
  // once with kFailedPrecondition. Callbacks run in the order they were added.
  void on_complete(std::function<void(const Status&)> callback) const;

  // Counts the time from `since` until now as time this rank waited in hvrun (straggler
  // attribution's blocked time), for a framework whose executor waits for on_complete() rather
  // than in wait() (TensorFlow's asynchronous kernels): call it once, when the operation
  // completed, with the time it was submitted.
  void count_wait_since(std::chrono::steady_clock::time_point since) const;

  // The final status; kFailedPrecondition while the operation is still running.
  Status status() const;

  // Library-allocated result of allgather, alltoall and reducescatter (empty for the others).
  // Valid after a successful completion and for as long as any copy of this handle lives.
  TensorView output() const;

  // The same result as an OwnedTensor that keeps it alive on its own: host bytes are copied,
  // CUDA memory is shared (freed when the handle and every such copy are gone).
  OwnedTensor output_tensor() const;

  // alltoall: rows this rank received from each rank (in rank order).
  std::vector<int64_t> received_splits() const;

  // join: the last rank to join; add_process_set: the new set's id; -1 before completion or
  // for other operations.
  int join_result() const;

  // The ranks that had called join() when this operation ran (they contributed neutral data
  // or no rows); empty before completion and when every rank took part. Lets a binding refuse
  // what another API does not allow while ranks have joined (Horovod: allgather, broadcast).
  std::vector<int> joined_ranks() const;

 private:
  std::shared_ptr<detail::HandleState> state_;
};

}  // namespace hvrun
