// One worker's telemetry: cumulative data-plane counters per (collective, backend),
// the trainer's steps (counted, and timed with their named phases and the time blocked in hvrun:
// step_timer.h), and, only while the coordinator says the job's timeline records,
// a bounded buffer of timeline events. ReportSender (report_sender.h) turns it into
// TelemetryReports on the Negotiate stream; the coordinator aggregates them
// (coordinator/telemetry/).
//
// Cost: with the timeline off, a phase is a mutex-guarded add to a small preallocated table
// (no allocation after the first response of each (op, backend)); submit/done hooks are one
// relaxed atomic load. Events (strings) are only built while recording.
//
// Threads: every method is thread-safe. The worker's loop thread reports phases, queue and done;
// its reader thread reports plan arrivals and timeline state; API threads mark steps and
// submissions; the sender thread takes reports.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hvrun.pb.h"
#include "worker_lib/blocked_time.h"
#include "worker_lib/telemetry/phase_observer.h"
#include "worker_lib/telemetry/step_timer.h"

namespace hvrun::detail::telemetry {

class WorkerTelemetry final : public PhaseObserver {
 public:
  // `cpu_backend`: the name CPU responses are counted under ("shm", "gloo", "hierarchical").
  explicit WorkerTelemetry(std::string cpu_backend, size_t max_buffered_events = 200000);

  // PhaseObserver (the thread that ran the response, or the GPU executor's that finished it).
  using PhaseObserver::on_phase;
  void on_phase(const ResponseGist& response, Phase phase, PhaseClock::time_point start,
                PhaseClock::time_point end, uint64_t bytes, std::string_view backend) override;

  // An API thread submitted `name` (timeline: "submitted" instant).
  void on_submitted(const std::string& name, v1::CollectiveOp op);
  // Reader thread: plan `seq` arrived (start of its responses' "queued" phase).
  void on_plan_received(uint64_t seq);
  // Loop thread: response `r` of plan `seq` starts executing now ("queued" ends).
  void on_response_started(uint64_t seq, const v1::Response& r);
  // Loop thread: response `r`'s handles completed (timeline: "done" instant per tensor).
  void on_response_done(const v1::Response& r, bool ok);
  // Any: an instant marker on this rank's lane `lane` (e.g. "join").
  void instant(const std::string& lane, const std::string& name);

  // PhaseObserver, any thread: the fast path's collectives (allreduces) run on the caller's
  // thread: three relaxed adds instead of on_phase()'s lock (each one is about a microsecond
  // long), folded into the (op, "<cpu backend>-fast") counters when a report is taken, or the
  // (op, "nccl-fast") ones for CUDA tensors.
  void on_fast_collective(v1::CollectiveOp op, PhaseClock::time_point start,
                          PhaseClock::time_point end, uint64_t bytes, bool on_gpu) override;

  // API threads: a step ended; a named phase of the step starts ("" ends the running one).
  void mark_step() {
    step_timer_.mark_step();
    steps_.fetch_add(1, std::memory_order_relaxed);
  }
  void mark_phase(std::string_view name) { step_timer_.mark_phase(name); }
  uint64_t steps() const { return steps_.load(std::memory_order_relaxed); }

  // Where this rank's blocking calls count their time (blocked_time.h); handles share it.
  BlockedTime& blocked_time() { return *blocked_; }
  const std::shared_ptr<BlockedTime>& blocked() const { return blocked_; }

  void set_recording(bool on);
  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  // Called (from the thread adding it) when the event buffer passes `threshold` events since
  // the last report: the sender should send soon.
  void set_pile_up_callback(size_t threshold, std::function<void()> callback);

  // The cumulative counters, the step count and the buffered events (moved out). `gpus` are
  // copied in by the caller.
  v1::TelemetryReport take_report();
  // Whether anything changed since the last take_report() (counters, steps or events).
  bool changed() const;

  size_t buffered_events() const;
  uint64_t dropped_events() const;

  // Wall-clock microseconds of a steady_clock time point (timeline timestamps).
  int64_t wall_us(PhaseClock::time_point t) const;

 private:
  struct Counters {
    v1::CollectiveOp op = v1::COLLECTIVE_OP_UNSPECIFIED;
    std::string backend;
    v1::CollectiveStats stats;  // the report's form, kept up to date
  };
  // The counters of (op, backend), created on first use. mutex_ held.
  v1::CollectiveStats& counters(v1::CollectiveOp op, std::string_view backend);
  std::string_view backend_of(const v1::Response& r) const;
  // The lane a response's data-plane phases go to: the tensor's name, or "fused N: first + M
  // more" for a fused response.
  static std::string response_lane(const ResponseGist& r);
  static std::string response_lane(const v1::Response& r) { return response_lane(ResponseGist::of(r)); }
  // Appends an event (mutex_ held); honours the bound. Returns true when the pile-up callback
  // should run.
  bool push_event(v1::TimelineEvent event);
  void add_event(v1::TimelineEvent event);

  const std::string cpu_backend_;
  const size_t max_events_;
  const PhaseClock::time_point steady_anchor_;
  const int64_t wall_anchor_us_;

  const std::shared_ptr<BlockedTime> blocked_ = std::make_shared<BlockedTime>();
  StepTimer step_timer_{*blocked_};

  std::atomic<bool> recording_{false};
  std::atomic<uint64_t> steps_{0};
  // The collectives run without the coordinator on one kind of device, counted apart.
  struct FastCounters {
    std::string backend;  // "<cpu backend>-fast", "nccl-fast"
    std::atomic<uint64_t> responses{0};
    std::atomic<uint64_t> ns{0};
    std::atomic<uint64_t> bytes{0};
    // mutex_: what of them is in counters_ already.
    uint64_t folded_responses = 0, folded_ns = 0, folded_bytes = 0;
    bool unfolded() const;
  };
  FastCounters fast_[2];  // [0]: CPU tensors, [1]: CUDA tensors
  // mutex_ held: adds the fast counters' growth since the last call to counters_.
  void fold_fast_counters(FastCounters& fast);

  mutable std::mutex mutex_;
  std::vector<Counters> counters_;             // mutex_; few entries, searched linearly
  std::vector<v1::TimelineEvent> events_;      // mutex_
  uint64_t dropped_ = 0;                       // mutex_
  uint64_t version_ = 0;                       // mutex_: bumped on every counter change
  uint64_t reported_version_ = 0;              // mutex_
  uint64_t reported_steps_ = 0;                // mutex_
  size_t pile_up_threshold_ = 0;               // mutex_
  bool pile_up_signalled_ = false;             // mutex_
  std::function<void()> on_pile_up_;           // set before use

  // Plan arrival times by seq (a ring: the loop executes plans in order, shortly after).
  static constexpr size_t kPlanRing = 256;
  struct Arrival {
    std::atomic<uint64_t> seq{0};
    std::atomic<int64_t> steady_ns{0};
  };
  std::array<Arrival, kPlanRing> arrivals_;
};

// hvrun::mark_step() without a Worker at hand: every live worker of the process counts it.
void register_for_steps(WorkerTelemetry* telemetry);
void unregister_for_steps(WorkerTelemetry* telemetry);
void mark_step_everywhere();
void mark_phase_everywhere(std::string_view name);

}  // namespace hvrun::detail::telemetry
