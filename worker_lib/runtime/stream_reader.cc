#include "worker_lib/runtime/stream_reader.h"

#include "common/logging.h"
#include "worker_lib/runtime/named_thread.h"

namespace hvrun::detail {

Status job_abort_status(const v1::JobAbort& a) {
  std::string rank = "rank " + std::to_string(a.rank());
  bool named = a.rank() < 0 || a.reason().find(rank) != std::string::npos;
  std::string who = named ? "" : " (" + rank + (a.host().empty() ? "" : " on host " + a.host()) + ")";
  // Elastic: only this membership ended; UNAVAILABLE says "reset and try again".
  if (a.membership_changed()) return unavailable("the job's membership changed: " + a.reason() + who);
  return aborted("job aborted: " + a.reason() + who);
}

void StreamReader::start() {
  thread_ = start_named_thread("hvrun-reader", [this] { read(); });
}

void StreamReader::read() {
  WorkState& state = c_.state;
  v1::CoordinatorMessage message;
  bool job_aborted = false;  // the coordinator closes the stream after a JobAbort: no surprise
  while (c_.stream.read(&message)) {
    if (message.kind_case() == v1::CoordinatorMessage::kAutopsy) {
      if (c_.on_autopsy) c_.on_autopsy(message.autopsy());
      message.Clear();
      continue;
    }
    if (message.kind_case() == v1::CoordinatorMessage::kHostsUpdated) {
      hosts_updated_.store(true, std::memory_order_release);
      message.Clear();
      continue;
    }
    bool abort_now = false;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      if (message.kind_case() == v1::CoordinatorMessage::kPlan) {
        ++state.plans_received;
        c_.telemetry.on_plan_received(message.plan().seq());
      } else if (message.kind_case() == v1::CoordinatorMessage::kTimeline) {
        c_.telemetry.set_recording(message.timeline().recording());
        // Stopped: the coordinator closes the file once every rank sent its last events.
        if (!message.timeline().recording()) c_.reporter.request_report();
      }
      // Plans received before a JobAbort still run, in order (every rank got them): what needs
      // no data plane (barrier, join, error responses) completes, collectives fail on the
      // torn-down data plane with the abort's reason. When the background thread has started
      // every received plan, nothing is left to run: fail what waits right now.
      abort_now = message.kind_case() == v1::CoordinatorMessage::kAbort &&
                  state.plans_started == state.plans_received;
      state.inbox.push_back(message);
    }
    if (message.kind_case() == v1::CoordinatorMessage::kAbort) {
      job_aborted = true;
      Status status = job_abort_status(message.abort());
      if (abort_now) state.terminate(status);
      // Unblock a collective the background thread may be stuck in (a dead peer, a stopped
      // one) and make the remaining ones fail at once.
      c_.tear_down(status.message(), message.abort().membership_changed());
    }
    state.wake.notify_all();
    message.Clear();
  }
  if (!c_.stopping() && !job_aborted) {
    // Nothing can be negotiated any more. Failed before stream_ended is set, so that the
    // background thread's fallback cannot fail the handles with vaguer words first.
    Status status = stream_lost_status();
    SPDLOG_ERROR("{}", status.message());
    state.terminate(status);
    c_.tear_down(status.message(), false);
  }
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    state.stream_ended = true;
  }
  state.wake.notify_all();
  c_.on_end();
}

Status StreamReader::stream_lost_status() {
  const std::string who = "rank " + std::to_string(c_.rank);
  const std::string where = "the coordinator at " + c_.coordinator_address;
  // How the stream ended says who ended it: a status the coordinator chose (it refused
  // something this rank sent), or one gRPC made because the connection broke.
  const Status why = c_.stream.finish();
  switch (why.code()) {
    case StatusCode::kOk:
    case StatusCode::kCancelled:
      return unavailable(who + ": " + where +
                         " ended the negotiation stream without a reason (no JobAbort); the "
                         "job cannot continue; see the coordinator's (hvrun's) log");
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return unavailable(who + ": lost the connection to " + where + " (" + why.message() +
                         "); the coordinator process may have exited or hung, or the network "
                         "to it failed; see hvrun's output for which");
    default:
      return Status(why.code(), who + ": " + where + " closed the negotiation stream: " +
                                    why.message());
  }
}

}  // namespace hvrun::detail
