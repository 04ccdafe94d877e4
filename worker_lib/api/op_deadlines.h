// Per-op timeouts (AllreduceOptions::timeout, OpOptions::timeout): an op submitted with a
// timeout of its own that has not completed when it runs out aborts the job, naming the op and
// its timeout. Giving up on the op alone is not possible: the other ranks would wait in the
// collective for this rank, or run it into buffers this rank's caller was told it may reuse.
// So a timed-out op ends the job, as NCCL's watchdog aborts its communicator; every pending
// handle, this op's among them, fails with kAborted and that reason (an elastic job may go on).
//
// Threads: watch() from any thread. The watching thread (hvrun-deadline) starts with the first
// watched op, so a worker that never uses per-op timeouts runs no extra thread; `abort` runs
// on it. An op's completion (on the worker's background thread) only drops its entry.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "hvrun/handle.h"

namespace hvrun::detail {

class OpDeadlines {
 public:
  using Abort = std::function<void(const std::string& reason)>;

  explicit OpDeadlines(Abort abort);
  ~OpDeadlines();  // stops the thread; a deadline not reached by then never fires
  OpDeadlines(const OpDeadlines&) = delete;
  OpDeadlines& operator=(const OpDeadlines&) = delete;

  // Aborts with a reason naming `what` (e.g. "rank 0: allreduce 'grad'") when `handle` has not
  // completed within `timeout`. timeout <= 0: nothing to watch.
  void watch(const Handle& handle, std::chrono::milliseconds timeout, const std::string& what);

 private:
  using Clock = std::chrono::steady_clock;
  using Due = std::multimap<Clock::time_point, uint64_t>;  // ids by deadline
  struct Pending {
    std::string what;
    std::chrono::milliseconds timeout;
    Due::iterator due;  // its entry in Table::due
  };
  // Shared with the completion callbacks, which may outlive this object in a handle the caller
  // keeps.
  struct Table {
    std::mutex mutex;
    std::condition_variable wake;
    std::map<uint64_t, Pending> pending;  // by id: the ops not yet completed
    Due due;
    uint64_t next_id = 0;
    bool stopping = false;
  };

  void run();

  Abort abort_;
  std::shared_ptr<Table> table_ = std::make_shared<Table>();
  std::once_flag started_;
  std::thread thread_;
};

}  // namespace hvrun::detail
