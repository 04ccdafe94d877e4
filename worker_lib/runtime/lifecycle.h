// Start, abort and stop of one runtime, in one place. Its phases go one way only:
//   building  RuntimeBuilder is filling the parts in; no thread runs yet
//   running   start() started the threads: reader, background loop, heartbeat, telemetry
//   stopping  shutdown() is under way (the first caller's; later callers return at once)
//   stopped   every thread joined, the coordinator said goodbye, the claim released
// A shutdown() while building (init failed part way, or the destructor of a runtime whose
// build failed) releases the claim and stops nothing: nothing was started. An elastic reset is
// shutdown() of this runtime, then a new one; abort() in between, or during the shutdown, asks
// nothing of a runtime that already stops taking work.
//
// Threads: shutdown and abort from any thread (several at once); start from the one that
// built the parts.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "common/status.h"
#include "worker_lib/runtime/runtime_parts.h"

namespace hvrun::detail {

class RuntimeLifecycle {
 public:
  enum class Phase { kBuilding, kRunning, kStopping, kStopped };

  explicit RuntimeLifecycle(RuntimeParts& parts) : parts_(parts) {}

  // The parts are built: starts their threads.
  void start();
  // Sends an AbortRequest (through the background thread) and tears the data planes down, so
  // a collective in progress fails at once. Does nothing once the runtime stopped taking work.
  void abort(const std::string& reason);
  // `failure`: this rank leaves because of an error of its own; it is reported to the
  // coordinator (which aborts the job naming this rank) instead of Goodbye.
  Status shutdown(const std::optional<std::string>& failure);
  // Tears this rank's data planes down (CPU backend, GPU executor, the sets'): any thread.
  // kMembershipChanged: an elastic reset follows, and the GPU communicator is kept (revoked)
  // for the survivors to shrink (backends/nccl/communicator_carry.h).
  enum class TearDown { kAbort, kMembershipChanged };
  void tear_down(const std::string& reason, TearDown why = TearDown::kAbort);

  Phase phase() const { return phase_.load(); }
  // Shutdown has begun: a stream that ends now ends as asked (the reader's question).
  bool stopping() const { return phase() >= Phase::kStopping; }

 private:
  // The first caller moves running (or building) to stopping; returns the phase it found.
  Phase begin_stop();
  // shutdown(failure): sends the failure as an AbortRequest; false when the job had already
  // failed or the coordinator could not be told.
  bool report_failure(const std::string& reason);
  // When a plan this rank takes part in went unexecuted (its ops were cancelled), tears the
  // data plane down so peers blocked in that collective fail at once, not at their op timeout.
  void release_peers_of_skipped_plans();
  // Goodbye (or, after a reported failure, the end of writes), then the stream's end, bounded.
  void say_goodbye(bool reported_failure);

  RuntimeParts& parts_;
  std::atomic<Phase> phase_{Phase::kBuilding};
};

}  // namespace hvrun::detail
