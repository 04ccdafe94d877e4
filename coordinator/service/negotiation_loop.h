// The coordinator's negotiation loop: owns the negotiation engines (one per process set,
// process_set_engines.h). Streams hand it their
// workers' batches (submit) and every plan goes, in seq order, to every attached stream.
//
// Latency: a batch is negotiated on the thread that received it (a gRPC thread),
// under engine_mutex_, and the plans it makes due are sent at once, so a tensor made ready by
// the last rank's batch is answered without a hop to another thread. Plans are serialized
// under engine_mutex_ in seq order and queued; one thread at a time (the "sender") writes the
// queue to the streams, so plans never overtake each other even when two gRPC threads
// negotiate at once. The loop thread only handles the clock: it wakes at the engine's next
// deadline (cycle time: ready tensors waiting for company), at the deadline for every rank's
// stream to attach, and periodically to look for stalls, names used with different ops
// (NegotiationEngine::fail_op_mismatches) and silent ranks (no message, heartbeat included,
// within the heartbeat timeout).
//
// Threads: every public method may be called from any thread. The hooks run with no lock of
// the loop held (everyone_left: on the thread that called goodbye()); they may call abort(),
// nothing else of the loop. hooks.observer: on_requests and on_stalls under engine_mutex_
// (one at a time, on the submitting / loop thread), on_plan from the sending thread (one at a
// time, seq order); an on_plan may overlap an on_requests, so the observer locks its own
// state, and it must not call back into the loop.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/engine/negotiation_engine.h"
#include "coordinator/service/process_set_engines.h"
#include "coordinator/stream_sink.h"
#include "coordinator/telemetry/negotiation_observer.h"

namespace hvrun::coordinator::service {

class NegotiationLoop {
 public:
  struct Hooks {
    std::function<void(int rank, const Status& error)> protocol_error;  // a rank broke protocol
    // Ranks that never attached a stream by the deadline of expect_streams_by().
    std::function<void(const std::vector<int>& ranks)> streams_missing;
    std::function<void()> everyone_left;  // every rank said Goodbye
    // A collective failed because `rank` left cleanly (Goodbye) without taking part, while
    // other ranks waited for it: that rank is the cause of their failure. Called once per
    // failed collective, on the thread that submitted or said goodbye, before the plan that
    // fails it is sent, so a cause recorded here precedes anything the failure leads to.
    std::function<void(int rank, const std::string& message)> departed_rank_failed;
    // A tensor waited past the stall shutdown threshold: `message` names the missing ranks,
    // the tensors and each rank's last completed operation; `rank` is the first missing rank.
    std::function<void(const std::string& message, int rank)> stalled;
    // `rank` sent nothing (no heartbeat) for `silent`, past the heartbeat timeout.
    std::function<void(int rank, std::chrono::milliseconds silent)> silent;
    // A stall warning was just logged (an autopsy may follow: waiting_tensors()).
    std::function<void()> stall_warned;
    // "host H, pid P" for a rank, for reports; may be empty.
    std::function<std::string(int rank)> rank_label;
    // Telemetry: told about requests, plans and stall warnings; may be null.
    telemetry::NegotiationObserver* observer = nullptr;
  };

  struct StallOptions {
    std::chrono::milliseconds warning{0};   // 0 = no warnings
    std::chrono::milliseconds shutdown{0};  // 0 = never
    std::chrono::milliseconds heartbeat_timeout{0};  // 0 = never
  };

  NegotiationLoop(EngineOptions options, StallOptions stall, Hooks hooks);
  ~NegotiationLoop();  // stops the thread

  // Attaches rank's stream and sends it Welcome. Fails when the rank is out of range, already
  // has a stream, or the job was aborted (then the sink also receives the JobAbort).
  Status attach(int rank, std::shared_ptr<StreamSink> sink);
  // The stream of `rank` ended; `sink` guards against detaching a newer stream.
  void detach(int rank, const StreamSink* sink);

  // Every rank must have attached a stream by `deadline` (else hooks.streams_missing).
  void expect_streams_by(NegotiationEngine::TimePoint deadline);
  // Ranks that neither opened a stream (and so, after an abort, were not told why) nor said
  // Goodbye.
  std::vector<int> ranks_without_stream() const;

  void submit(int rank, v1::RequestBatch batch);
  // Any message from `rank` (a Heartbeat carries the last plan it finished executing).
  void heard_from(int rank, std::optional<uint64_t> finished_plan_seq = std::nullopt);
  void goodbye(int rank);

  // Every tensor some ranks submitted and others not yet, however briefly (autopsies).
  std::vector<StalledTensor> waiting_tensors();
  // Sends `message` to every attached stream (after the plans already queued on it).
  void send_to_all(const v1::CoordinatorMessage& message);

  // Sends JobAbort to every stream and finishes them with `status`; refuses later attaches.
  void abort(const v1::JobAbort& message, const Status& status);

  void stop();

 private:
  // A plan taken from the engine, serialized once for every stream.
  struct Outgoing {
    v1::CoordinatorMessage wrapped;
    std::shared_ptr<const grpc::ByteBuffer> bytes;
  };

  void run();
  // engine_mutex_ held: moves every plan due at `now` to outgoing_ (in seq order).
  void take_plans_locked(NegotiationEngine::TimePoint now);
  // Sends outgoing_ to the streams unless another thread is doing so (it sends these too).
  void send_taken_plans();
  void broadcast(const Outgoing& plan);
  // After the engine changed: wakes the loop thread when a plan now waits for an earlier
  // deadline than the one it sleeps until.
  void wake_if_deadline_earlier();
  void check_streams_attached();
  void check_stalls(NegotiationEngine::TimePoint now);
  void check_op_mismatches(NegotiationEngine::TimePoint now);
  // Tells hooks.departed_rank_failed (no lock held) what the engine gave under engine_mutex_.
  void report_departure_failures(const std::vector<DepartureFailure>& failures);
  void check_heartbeats(NegotiationEngine::TimePoint now);
  // " (host H, pid P; last completed operation: allreduce 'x' in plan 12)"
  std::string rank_detail(int rank);

  const int world_size_;
  const StallOptions stall_;
  const std::chrono::milliseconds op_mismatch_grace_;  // 0: no such checks
  Hooks hooks_;
  std::mutex engine_mutex_;    // lock order: engine_mutex_, then send_mutex_ / liveness_mutex_
  ProcessSetEngines engine_;   // guarded by engine_mutex_: every process set's engine
  // guarded by engine_mutex_: recent plans' last op, for stall reports
  std::map<uint64_t, std::string> plan_summaries_;
  std::optional<NegotiationEngine::TimePoint> next_stall_check_;  // loop thread only
  std::set<std::string> warned_;  // loop thread only: stalls logged ("set/name")

  std::mutex send_mutex_;
  std::deque<Outgoing> outgoing_;  // guarded by send_mutex_: taken, not yet sent, in seq order
  bool sending_ = false;           // guarded by send_mutex_: a thread is sending outgoing_

  std::mutex inbox_mutex_;     // the loop thread's wake-ups
  std::condition_variable inbox_cv_;
  bool stopping_ = false;      // guarded by inbox_mutex_
  std::optional<NegotiationEngine::TimePoint> attach_deadline_;  // guarded by inbox_mutex_
  bool deadline_changed_ = false;  // guarded by inbox_mutex_: wakes the loop to re-plan its wait
  // guarded by inbox_mutex_: what the loop thread sleeps until (max while it recomputes)
  NegotiationEngine::TimePoint loop_waits_until_ = NegotiationEngine::TimePoint::max();

  // Held while a plan or the JobAbort is queued on the streams, so that every stream gets
  // them in the same order. Not streams_mutex_: a stream's end may run inline in a send and
  // detach itself. Lock order: delivery_mutex_, then streams_mutex_.
  std::mutex delivery_mutex_;
  mutable std::mutex streams_mutex_;  // also orders Welcome before the plans a stream receives
  std::vector<std::shared_ptr<StreamSink>> streams_;  // by rank; guarded by streams_mutex_
  std::vector<uint8_t> said_goodbye_;                 // guarded by streams_mutex_
  std::vector<uint8_t> attached_once_;                // or told of the abort; streams_mutex_
  int goodbyes_ = 0;                                  // guarded by streams_mutex_
  uint64_t last_seq_ = 0;                             // guarded by streams_mutex_
  std::shared_ptr<const grpc::ByteBuffer> abort_message_;  // guarded by streams_mutex_
  Status abort_status_;                               // guarded by streams_mutex_
  std::mutex liveness_mutex_;
  std::vector<NegotiationEngine::TimePoint> last_heard_;  // by rank; guarded by liveness_mutex_
  std::vector<uint64_t> finished_seq_;                    // by rank; guarded by liveness_mutex_
  std::vector<uint8_t> silent_reported_;                  // loop thread only

  std::thread thread_;
};

}  // namespace hvrun::coordinator::service
