// Straggler attribution, step by step, from the ranks' step timings (TelemetryReport.
// step_timings, worker_lib/telemetry/step_timer.h): which rank arrived last at each step and
// by how much, per-rank lateness, which named phase of the late rank grew, and a warning when one
// rank is late again and again.
//
// Why blocked time and not arrival times: in the steady state the ranks agree on cached
// collectives among themselves (the fast path, cached rounds) and the coordinator sees no
// request at all; and two hosts' clocks are not comparable to a millisecond. A synchronous
// step ends on every rank together (its collectives complete everywhere at once), so the time a
// rank spent blocked in hvrun during a step is how long it waited for the last arrival:
// rank r's lateness in step k is max over ranks of blocked(k) less its own blocked(k). Each
// number comes from one rank's own clock.
//
// A step is attributed once every rank's timing of it arrived (steps are matched by their
// 1-based index: the k-th mark_step() of each rank). Steps some rank never reports (it joined,
// left, or dropped them) are given up once 256 later ones wait. A step in which no rank was
// blocked at all (nobody waited for anybody) is not attributed.
//
// Which phase grew: for the step's last rank, each phase's busy time against the median of the
// other ranks' in that step; averaged over the steps it was last.
//
// Warning (warning_threshold > 0): when one rank was last by at least the threshold in at least
// half of the last 10 attributed steps, a line naming it, its median lateness and the phase that
// grew most; again for the same rank at most every 10 s.
//
// Replacement (a ReplacementRule with a window): once the last `window` attributed steps of the
// current membership are in, a rank last by at least the rule's threshold in more than half of
// them is the replaceable straggler (fill() reports it; the launcher acts on it). Stricter than
// the warning on purpose: stopping a process costs the job a reset, so it needs a majority of a
// longer window, and a new membership starts its window afresh.
//
// Not thread-safe: the aggregator calls it under its lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/telemetry/job_telemetry.h"
#include "hvrun.pb.h"

namespace hvrun::coordinator::telemetry {

// When a rank is replaceable (see above).
struct ReplacementRule {
  std::chrono::microseconds threshold{0};
  size_t window = 0;  // 0 = never replace
};

class StragglerTracker {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kWarningWindow = 10;
  static constexpr size_t kRecentSteps = 2048;
  static constexpr size_t kMaxWaitingSteps = 256;
  static constexpr std::chrono::seconds kWarningInterval{10};

  // `warning_threshold`: 0 = no warnings.
  StragglerTracker(int world_size, std::chrono::microseconds warning_threshold,
                   ReplacementRule replacement = {});

  void set_host(int rank, const std::string& host);
  // Elastic jobs: a new membership of `world_size` ranks (numbered afresh, their step counts
  // restarting): steps still waiting for ranks of the last one are dropped; the counts by rank
  // stay (they are by rank number, as the metrics are).
  void reset_membership(int world_size);
  // One step of `rank`. Returns a warning line to log when this step completes one (see above).
  std::optional<std::string> add(int rank, const v1::StepTiming& step, Clock::time_point now);

  // The rank to replace now under the ReplacementRule, if any (see above).
  const std::optional<StragglerEvidence>& replaceable() const { return replaceable_; }

  // Fills the straggler fields of `job` (and of its ranks, by rank).
  void fill(JobTelemetry& job) const;

 private:
  struct Timing {
    uint64_t blocked_ns = 0;
    std::vector<std::pair<std::string, uint64_t>> phases;  // busy ns
  };
  struct Waiting {
    std::vector<std::optional<Timing>> by_rank;
    int have = 0;
  };
  struct PhaseSums {
    double seconds = 0;
    double others_seconds = 0;
    uint64_t steps = 0;
  };
  // One attributed step, as the warning window keeps it.
  struct Attributed {
    int last = -1;
    double lateness = 0;              // the last rank's, seconds
    std::vector<PhaseGrowth> growth;  // the last rank's phases against the others'
  };
  struct RankStats {
    uint64_t last_steps = 0;
    double lateness_seconds = 0;
    std::deque<std::pair<double, bool>> recent;  // (lateness, was last)
    std::map<std::string, PhaseSums> phases;     // over the steps it was last
    std::optional<Clock::time_point> warned;
    std::string host;
  };

  std::optional<std::string> attribute(Waiting& step, Clock::time_point now);
  std::optional<std::string> maybe_warn(Clock::time_point now);
  void judge_replacement();

  int world_size_;
  const std::chrono::microseconds warning_threshold_;
  std::map<uint64_t, Waiting> waiting_;  // by step index
  std::vector<RankStats> ranks_;
  std::deque<Attributed> window_;
  const ReplacementRule replacement_;
  std::deque<std::pair<int, double>> replace_window_;  // (last rank, its lateness in seconds)
  std::optional<StragglerEvidence> replaceable_;
  uint64_t attributed_ = 0;
};

}  // namespace hvrun::coordinator::telemetry
