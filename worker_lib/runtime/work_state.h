// What the runtime's threads share about the work in progress: the ops in flight, what waits to
// be sent or handled, and whether the runtime still takes work. One mutex guards all of it
// (the innermost lock of runtime.h's order); `wake` is the background thread's wake-up, also
// waited on by shutdown (the stream's end) and by explain_failure (the job's abort reason).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "hvrun.pb.h"
#include "worker_lib/execution/pending_op.h"
#include "worker_lib/runtime/in_flight_table.h"

namespace hvrun::detail {

struct WorkState {
  std::mutex mutex;
  std::condition_variable wake;
  // Every field below is guarded by `mutex`.
  InFlightTable in_flight;  // by name
  std::deque<std::shared_ptr<PendingOp>> outbox;                            // not yet sent
  std::chrono::steady_clock::time_point outbox_since;  // when the outbox last stopped being empty
  std::chrono::steady_clock::time_point outbox_latest;  // when the latest op joined it
  // The background thread sleeps until woken (PlanRunner::loop): a submission wakes it (one
  // that may gather, through the batch timer a cycle later), unless it is gathering or working
  // already (it looks at the outbox before it sleeps again).
  bool loop_idle = false;
  // A timer will wake it for the batch in the outbox (Submitter::let_batches_gather).
  bool batch_timer_armed = false;
  std::deque<v1::CoordinatorMessage> inbox;            // from the reader, for the loop thread
  std::optional<Status> terminal;                      // set once the runtime stops taking work
  std::optional<std::string> abort_reason;             // abort() asked, not yet sent
  bool stop_requested = false;
  bool stream_ended = false;
  bool shut_down = false;
  bool hosts_updated = false;  // elastic: the coordinator said slots were added (HostsUpdated)
  // Per process set: only a set's members count its barriers and groups.
  std::map<uint32_t, uint64_t> barrier_counter;
  std::map<uint32_t, uint64_t> group_counter;
  uint64_t process_set_calls = 0;  // add/remove_process_set calls: every rank counts alike
  uint64_t plans_received = 0;  // by the reader thread
  uint64_t plans_started = 0;   // by the background thread
  bool skipped_plan = false;    // a plan this rank takes part in arrived after `terminal`
  // Ops in `in_flight` that the cached rounds hold (cached_rounds.h): not sent, not in outbox.
  size_t held_for_rounds = 0;

  // Fails every in-flight op with `status` and makes later submissions fail with it too; the
  // first status wins. Any thread, `mutex` not held.
  void terminate(Status status);
  // `mutex` held: an op this rank sent waits for the coordinator's plan. (An unsent op may
  // still run by agreement, cached_rounds.h; one that cannot refuses the round when it is
  // submitted, and again when it is sent.)
  bool waiting_for_coordinator() const {
    return in_flight.size() > held_for_rounds + outbox.size();
  }
  // A failed collective's status, or the job's abort reason when one arrives shortly after
  // (the coordinator's JobAbort names the dead rank; the data plane only says "connection
  // reset"). `mutex` not held.
  Status explain_failure(Status failed);
};

}  // namespace hvrun::detail
