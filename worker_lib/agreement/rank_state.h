// What the steady state (fast_path.h, cached_rounds.h) needs of this rank's runtime: to look at
// its work at one instant (may this rank meet its peers in a round?), and to take, hold, start
// and give back the ops it submitted. The runtime adapts its parts to it (runtime/
// runtime_rank_state.h), so this folder includes nothing of the runtime while the runtime builds
// on it.
//
// Why an interface and not the runtime's state itself: the rounds' rules (who may hold what,
// which key the ranks compare) stay here beside the agreement, and the runtime keeps its state
// and lock order to itself. Each call is one indirection per round or per blocking call, never
// per tensor: the per-op work of a round (matching ops with the coordinator's cache) runs inside
// take_outbox, on the runtime's side, with RequestCache's rules (request_cache.h).
//
// Threads: any. Each call but negotiated() takes the runtime's state lock itself (after the
// executor's lock in the runtime's lock order), so none is called with that lock held.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "worker_lib/agreement/request_cache.h"
#include "worker_lib/execution/pending_op.h"

namespace hvrun::detail {

// An op the cached rounds hold instead of sending it: its cache id, and the op.
struct HeldOp {
  uint32_t id;
  std::shared_ptr<PendingOp> op;
};

class RankState {
 public:
  // What take_outbox did.
  enum class Taken {
    kNothing,   // nothing unsent, nothing held
    kTerminal,  // the runtime failed every op in flight, the held ones too: forget them
    kSend,      // this rank may not hold all of it: send what it holds, and the outbox
    kHeld,      // everything unsent is held now (appended to `held`): `held` may take a round
  };

  virtual ~RankState() = default;

  // Nothing in flight or unsent, every received plan executed, no message unhandled, no abort,
  // stop or end of stream, and no timeline recording (it shows every negotiation).
  virtual bool idle() = 0;
  // An op this rank sent waits for the coordinator's plan (a join, an op sent meanwhile).
  virtual bool waiting_for_coordinator() = 0;
  // A failed collective's status, or the job's abort reason when one arrives shortly after.
  virtual Status explain_failure(Status failed) = 0;
  // The executor's lock held: the coordinator's cache as assigned so far.
  virtual const RequestCache& negotiated() const = 0;

  // Whether every unsent op is of a kind a round may run (RequestCache::may_run_fast).
  virtual bool outbox_may_hold() = 0;
  // The executor's lock held, `held` what the caller holds: moves every unsent op, with its
  // cache id, onto the end of `held` when this rank waits for nothing else (nothing sent
  // without its plan, every plan executed, no abort, stop or recording) and each op has an
  // entry (RequestCache::round_entry) with an id up to `max_id`; else leaves the outbox as it
  // is.
  virtual Taken take_outbox(uint32_t max_id, std::vector<HeldOp>& held) = 0;
  // The executor's lock held: the agreed ops leave the table of ops in flight (they run now);
  // false when the runtime already failed them.
  virtual bool start_agreed(const std::vector<HeldOp>& agreed) = 0;
  // Puts `held` back before the outbox, in order, and sends the outbox to the coordinator;
  // empties `held`.
  virtual void send_held(std::vector<HeldOp>& held) = 0;
  // Sends the outbox to the coordinator.
  virtual void send_outbox() = 0;
  // Sends the outbox unless it is empty (already sent or being sent).
  virtual void send_pending() = 0;
};

}  // namespace hvrun::detail
