// The coordinator's telemetry for one job: takes every worker's TelemetryReport
// (cumulative data-plane counters, steps, GPU samples, timeline events) and the negotiation
// loop's requests, plans and stalls (NegotiationObserver), and
//  * keeps the per-rank / per-job numbers that snapshot() copies into a JobTelemetry (read by
//    /metrics and hvrun's end-of-job summary; stays readable after the job ended), and
//  * attributes each step's lateness to the rank the others waited for, from the ranks' step
//    timings (straggler_tracker.h), and logs --straggler-warning-ms warnings, and
//  * while the timeline records, writes it (timeline_writer.h): the workers' events, plus its
//    own "negotiated" slices (request arrival -> plan sent, args: the ranks it waited for) and
//    markers for plans, joins, stalls and aborts. Recording starts at construction
//    (--timeline-filename) or when a worker sends TimelineControl; workers are told with
//    TimelineState when it starts or stops, and after attaching while it is on.
//
// Negotiation bookkeeping, per rank and tensor: negotiation = plan sent - this rank's request
// arrived; wait = the last rank's arrival - this rank's arrival (the part spent waiting for the
// other ranks to submit it). A rank's negotiation total sums its tensors' (divided by their
// count it is the negotiation latency); its wait total is wall time: tensors waited for at the
// same time count that time once.
//
// Threads: every method is thread-safe (one mutex); the negotiation loop, the streams' gRPC
// threads and readers (snapshot) call it. Stream messages are sent outside the lock.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "coordinator/stream_sink.h"
#include "coordinator/telemetry/aggregator_util.h"
#include "coordinator/telemetry/job_telemetry.h"
#include "coordinator/telemetry/negotiation_observer.h"
#include "coordinator/telemetry/straggler_tracker.h"
#include "coordinator/telemetry/timeline_writer.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator::telemetry {

class Aggregator final : public NegotiationObserver {
 public:
  struct Options {
    std::string job_id;
    int world_size = 0;
    int64_t fusion_threshold_bytes = 0;
    std::string timeline_filename;  // non-empty: record from the start
    bool timeline_horovod_names = false;  // phases under Horovod's names
    // --straggler-warning-ms: warn when one rank is late this much, again and again (0 = off).
    std::chrono::microseconds straggler_warning{0};
    // --replace-stragglers: when a rank is replaceable (straggler_tracker.h); window 0 = never.
    ReplacementRule straggler_replacement;
  };
  explicit Aggregator(Options options);
  ~Aggregator() override;  // finish()

  // Why the timeline file given at start could not be created (OK otherwise).
  Status startup_status() const;

  // Streams (gRPC threads).
  void on_attached(int rank, std::shared_ptr<StreamSink> sink, const std::string& host,
                   int local_rank);
  void on_goodbye(int rank);
  // Elastic jobs: the ranks now number `world_size` (coordinator/service/job.h). Ranks beyond
  // it stop counting towards the job's step rate; their counters stay.
  void on_membership(int world_size);
  void on_lost(int rank);
  void on_report(int rank, const v1::TelemetryReport& report);
  // TimelineControl from `rank`: start writing `filename` (replacing a timeline being written to
  // another file), or stop when empty.
  void on_timeline_control(int rank, const std::string& filename);
  void on_abort(const std::string& reason, int rank);

  // NegotiationObserver (threads: see negotiation_observer.h).
  void on_requests(int rank, const v1::RequestBatch& batch, TimePoint arrived) override;
  void on_plan(const v1::Plan& plan, TimePoint sent) override;
  void on_stalls(const std::vector<StalledTensor>& stalls) override;

  JobTelemetry snapshot() const;
  // The job is over: closes the timeline (valid JSON). Idempotent; later events are dropped.
  void finish();

 private:
  struct RankState {
    RankTelemetry t;
    std::shared_ptr<StreamSink> sink;  // null once gone
    bool reported = false;
    TimePoint last_report{};
    std::deque<std::pair<TimePoint, uint64_t>> step_samples;  // for the step rate
    // The time this rank waited, each moment once however many tensors it waited for then
    // (t.wait_seconds adds what this adds).
    detail::CoveredTime waiting;
  };
  // A tensor's arrivals in the round being negotiated. Entries of cached tensors are kept
  // (inactive) between rounds, so a training step allocates nothing here.
  struct Pending {
    std::vector<TimePoint> arrival;  // by rank; TimePoint{} = not submitted
    bool active = false;
  };

  int64_t wall_us(TimePoint t) const;
  // mutex_ held. Starts/stops the timeline; returns the sinks to tell (sent outside the lock).
  Status open_timeline_locked(const std::string& path);
  void close_timeline_locked(const std::string& why);
  // Stopping: `rank` has nothing more to write; closes the file after the last such rank.
  void stop_done_locked(int rank);
  void ensure_process_locked(int pid);
  std::vector<std::shared_ptr<StreamSink>> sinks_locked() const;
  void tell(const std::vector<std::shared_ptr<StreamSink>>& sinks, bool recording);
  void mark_locked(const std::string& name, int rank, TimePoint arrived);
  // Marks a cached request; false when the id's name is not known yet.
  bool mark_id_locked(uint32_t id, int rank, TimePoint arrived);
  void mark_in(Pending& p, const std::string& name, int rank, TimePoint arrived);
  void account_tensor_locked(const v1::Response& response, const v1::ResponseTensor& tensor,
                             uint64_t seq, TimePoint sent);

  const Options options_;
  const TimePoint steady_anchor_;
  const int64_t wall_anchor_us_;

  mutable std::mutex mutex_;
  std::vector<RankState> ranks_;                       // by rank
  int membership_size_ = 0;                            // the current membership's ranks
  // Tensors negotiating now: by name (full requests) and by cache id (the steady state: no
  // string hashing per request). One round may have both (a rank re-sent full metadata).
  std::unordered_map<std::string, Pending> pending_;
  std::vector<Pending> pending_by_id_;   // index: cache id
  std::vector<std::string> id_names_;    // index: cache id -> tensor name ("" = not yet seen)
  // Requests seen before the plan that completes their tensor's previous round was reported
  // (the negotiation may run on several threads: a worker can answer a plan before on_plan):
  // a name submitted again while still pending, and cache ids not yet learnt from a plan.
  struct Early {
    int rank;
    TimePoint arrived;
  };
  std::unordered_map<std::string, std::vector<Early>> early_;
  struct Unresolved {
    int rank;
    uint32_t cache_id;
    TimePoint arrived;
  };
  std::vector<Unresolved> unresolved_;
  StragglerTracker stragglers_;
  uint64_t fused_responses_ = 0;
  uint64_t fused_bytes_ = 0;
  uint64_t plans_ = 0;
  std::unique_ptr<TimelineWriter> timeline_;
  // Stopping: workers were told to stop recording; the file closes once every rank that was
  // attached sent a report taken after it stopped (its last events), left, or the job ended.
  bool stopping_ = false;
  std::string stop_reason_;
  std::vector<uint8_t> stop_waiting_;  // by rank
  Status startup_status_;
  bool finished_ = false;
};

}  // namespace hvrun::coordinator::telemetry
