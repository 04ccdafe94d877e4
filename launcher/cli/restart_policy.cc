#include "launcher/cli/restart_policy.h"

namespace hvrun::launcher {
namespace {

// A rank's failure, told by its own exit or by the coordinator naming it.
bool names_a_rank(const JobEnd& end) {
  return end.rank >= 0 &&
         (end.kind == JobEndKind::kWorkerFailed || end.kind == JobEndKind::kControlPlane);
}

// Two failures are "the same" when the same cause ended both: the same rank failed the same way,
// or the same kind of failure named no rank (pids and timings in the messages differ from
// attempt to attempt, so the message itself is not compared). One rank's failure may reach
// hvrun first as its exit or first as the coordinator's verdict naming it (whichever comes
// first): both are that rank's failure.
bool same_failure(const AttemptOutcome& a, const AttemptOutcome& b) {
  if (a.end.rank != b.end.rank) return false;
  if (names_a_rank(a.end) && names_a_rank(b.end) && a.end.kind != b.end.kind) return true;
  return a.exit_code == b.exit_code && a.end.kind == b.end.kind && a.end.signal == b.end.signal;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  const long long tenths = ms.count() / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

}  // namespace

std::string describe_cause(const JobEnd& end) {
  if (!end.message.empty()) return end.message;
  std::string what = end.rank >= 0 ? "rank " + std::to_string(end.rank) : std::string("the job");
  return what + " failed (exit code " + std::to_string(end.exit_code) + ")";
}

RestartPolicy::RestartPolicy(int max_restarts, std::chrono::milliseconds quick_failure)
    : max_restarts_(max_restarts < 0 ? 0 : max_restarts), quick_failure_(quick_failure) {}

RestartPolicy::Decision RestartPolicy::after_attempt(const AttemptOutcome& outcome) {
  attempts_.push_back(outcome);
  if (outcome.exit_code == 0) return {};
  const std::string cause = describe_cause(outcome.end);
  if (max_restarts_ == 0) return {};  // restarts are off: the failure summary says it all
  if (outcome.end.kind == JobEndKind::kSignal)
    return {false, "hvrun was stopped (" + signal_name(outcome.end.signal) + "); not restarting"};
  if (restarts_ >= max_restarts_)
    return {false, "the job failed again and all " + std::to_string(max_restarts_) +
                       " restart(s) of --max-restarts are used; last cause: " + cause};
  if (attempts_.size() >= 2) {
    const AttemptOutcome& previous = attempts_[attempts_.size() - 2];
    if (same_failure(previous, outcome) && previous.ran_for < quick_failure_ &&
        outcome.ran_for < quick_failure_)
      return {false, "the job failed the same way twice, each time within " +
                         seconds_text(quick_failure_) + " of starting (" + cause +
                         "); not restarting again: restarts cannot fix this"};
  }
  ++restarts_;
  std::string line = "restart " + std::to_string(restarts_) + " of " +
                     std::to_string(max_restarts_) + " after " + seconds_text(outcome.ran_for) +
                     ": " + cause;
  log_.push_back(line);
  return {true, line};
}

}  // namespace hvrun::launcher
