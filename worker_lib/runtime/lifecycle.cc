#include "worker_lib/runtime/lifecycle.h"

#include <unistd.h>

#include <chrono>

#include "common/logging.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {
namespace {

constexpr std::chrono::seconds kGoodbyeTimeout{5};

}  // namespace

void RuntimeLifecycle::start() {
  RuntimeParts& p = parts_;
  p.reader->start();
  p.plan_runner->start();
  p.heartbeat->start();
  // Timeline events piling up are sent at once instead of at the next half-second report.
  constexpr size_t kPileUp = 4096;
  p.telemetry->set_pile_up_callback(kPileUp, [sender = p.reporter.get()] { sender->wake(); });
  telemetry::register_for_steps(p.telemetry.get());
  p.reporter->start();
  if (!p.config.death_watch.empty()) {
    auto held = DeathWatchHolder::hold(p.config.death_watch);
    if (held.is_ok()) {
      p.death_watch = std::move(held).value();
    } else {
      SPDLOG_DEBUG("the launcher sees this rank's death once it can be reaped only: {}",
                   held.status().message());
    }
  }
  phase_.store(Phase::kRunning);
}

RuntimeLifecycle::Phase RuntimeLifecycle::begin_stop() {
  Phase found = phase_.load();
  while (found < Phase::kStopping && !phase_.compare_exchange_weak(found, Phase::kStopping)) {
  }
  return found;
}

void RuntimeLifecycle::tear_down(const std::string& reason, TearDown why) {
  if (why == TearDown::kMembershipChanged && parts_.gpu) parts_.gpu->membership_changed(reason);
  if (parts_.executor) parts_.executor->abort(reason);
  if (parts_.process_sets) parts_.process_sets->abort(reason);
}

void RuntimeLifecycle::abort(const std::string& reason) {
  if (!parts_.state.request_abort(reason)) return;
  // The background thread may be inside a collective (it sends the AbortRequest only between
  // operations): tear this rank's data planes down now so that collective fails at once.
  tear_down("job aborted: " + reason + " (rank " + std::to_string(parts_.topology.rank) + ")");
}

Status RuntimeLifecycle::shutdown(const std::optional<std::string>& failure) {
  const Phase found = begin_stop();
  if (found >= Phase::kStopping) return Status::ok();  // another caller stops it
  RuntimeParts& p = parts_;
  const std::string rank = std::to_string(p.topology.rank);
  if (found == Phase::kBuilding) {  // nothing was started
    p.claim.reset();
    phase_.store(Phase::kStopped);
    return Status::ok();
  }
  // Before anything else: the peers must learn this rank's failure before its data plane
  // goes away under them, so that the job's abort names the cause, not a consequence.
  const bool reported_failure = failure && report_failure(*failure);
  if (p.lane.rounds()) p.lane.rounds()->leave();  // peers in a fast round, now or later, fall back
  p.state.terminate(cancelled("hvrun worker rank " + rank +
                              " shut down before this collective completed"));
  p.state.request_stop(failed_precondition("hvrun worker rank " + rank +
                                           " was shut down; no more collectives can be submitted"));
  p.plan_runner->join();
  // Responses still on the GPU finish (or fail with the abort) before the telemetry's last
  // report counts them and before anything they use goes.
  if (p.gpu) p.gpu->drain();
  p.submitter->stop_batch_timer();  // nothing can be submitted any more
  release_peers_of_skipped_plans();
  p.autopsy->stop();  // no report after Goodbye
  p.heartbeat->stop();
  p.heartbeat->join();

  // The last telemetry report (final counters, the timeline's tail) goes before Goodbye.
  p.reporter->flush_and_stop();
  telemetry::unregister_for_steps(p.telemetry.get());

  say_goodbye(reported_failure);
  p.reader->join();
  release_peers_of_skipped_plans();  // plans that arrived after the loop stopped
  (void)p.stream->finish();  // cancelled or aborted streams end with an error: nothing to do
  // After a membership change, the next Worker of this process may shrink the communicator (or
  // say that it held one, when slots were added and it cannot).
  if (p.gpu && p.reader->hosts_updated())
    p.gpu->membership_changed("slots were added to the job: the membership changes at this reset");
  if (p.gpu) p.gpu->carry_communicator_over();
  p.death_watch.reset();  // a clean end: the launcher is not told of a death
  p.claim.reset();  // this process may init() again
  if (p.private_coordinator) p.private_coordinator->wait_for_exit();  // it ends on Goodbye
  phase_.store(Phase::kStopped);
  return Status::ok();
}

void RuntimeLifecycle::say_goodbye(bool reported_failure) {
  RuntimeParts& p = parts_;
  // The loop and the heartbeat have stopped, but an API thread may still be inside
  // flush_outbox() with a batch it took: the sender's lock lets it finish before Goodbye, and
  // write_last() refuses anything written after.
  p.submitter->exclusive([&] {
    v1::WorkerMessage goodbye;
    goodbye.mutable_goodbye();
    // A rank that reported its failure leaves without Goodbye: it did not finish cleanly.
    if (reported_failure ? !p.stream->close_writes() : !p.stream->write_last(goodbye))
      SPDLOG_DEBUG("Goodbye not delivered (stream already closed)");
  });
  std::unique_lock<std::mutex> lock(p.state.mutex);
  if (!p.state.wake.wait_for(lock, kGoodbyeTimeout, [&] { return p.state.stream_ended; })) {
    SPDLOG_WARN("coordinator did not close the stream within {} s after Goodbye; cancelling",
                kGoodbyeTimeout.count());
    p.stream->cancel();
  }
}

bool RuntimeLifecycle::report_failure(const std::string& reason) {
  RuntimeParts& p = parts_;
  {
    std::lock_guard<std::mutex> lock(p.state.mutex);
    // The job already failed (this rank's error may well be its consequence): the coordinator
    // knows the cause and another report would only compete with it.
    if (p.state.terminal || p.state.abort_reason) return false;
  }
  v1::WorkerMessage message;
  v1::AbortRequest* a = message.mutable_abort();
  a->set_reason("rank " + std::to_string(p.topology.rank) + " on host " + p.config.host +
                " (pid " + std::to_string(getpid()) + ") failed: " + reason);
  a->set_rank(p.topology.rank);
  a->set_host(p.config.host);
  SPDLOG_ERROR("reporting this rank's failure to the coordinator: {}", a->reason());
  bool sent = p.submitter->exclusive([&] { return p.stream->write(message); });
  // The stream is gone (the coordinator may still be there): say it once more, briefly, since
  // the process is about to exit.
  constexpr std::chrono::seconds kUnaryAbortDeadline{2};
  if (!sent) sent = p.client->abort(*a, kUnaryAbortDeadline).is_ok();
  return sent;
}

void RuntimeLifecycle::release_peers_of_skipped_plans() {
  if (!parts_.plan_runner->left_peers_waiting()) return;
  // The coordinator planned a collective with this rank's cancelled op: the peers run it and
  // would wait for this rank until their op timeout. Tear the data plane down so they fail now.
  tear_down("rank " + std::to_string(parts_.topology.rank) +
            " shut down before running a collective the coordinator had already planned with it "
            "(shutdown() cancelled it); wait for every collective before shutdown()");
}

}  // namespace hvrun::detail
