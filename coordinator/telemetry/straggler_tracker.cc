#include "coordinator/telemetry/straggler_tracker.h"

#include <algorithm>
#include <cstdio>

namespace hvrun::coordinator::telemetry {
namespace {

double ns_seconds(uint64_t ns) { return static_cast<double>(ns) * 1e-9; }

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

// The q-quantile (0..1) by nearest rank.
double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  const auto k = static_cast<size_t>(std::min<double>(
      static_cast<double>(values.size() - 1), q * static_cast<double>(values.size() - 1) + 0.5));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

uint64_t busy_of(const std::vector<std::pair<std::string, uint64_t>>& phases,
                 const std::string& name) {
  for (const auto& [n, busy] : phases)
    if (n == name) return busy;
  return 0;
}

}  // namespace

StragglerTracker::StragglerTracker(int world_size, std::chrono::microseconds warning_threshold,
                                   ReplacementRule replacement)
    : world_size_(std::max(world_size, 0)),
      warning_threshold_(warning_threshold),
      ranks_(static_cast<size_t>(world_size_)),
      replacement_(replacement) {}

void StragglerTracker::reset_membership(int world_size) {
  world_size_ = std::max(world_size, 0);
  if (ranks_.size() < static_cast<size_t>(world_size_)) ranks_.resize(static_cast<size_t>(world_size_));
  waiting_.clear();
  window_.clear();
  replace_window_.clear();
  replaceable_.reset();
}

void StragglerTracker::set_host(int rank, const std::string& host) {
  if (rank >= 0 && rank < world_size_) ranks_[rank].host = host;
}

std::optional<std::string> StragglerTracker::add(int rank, const v1::StepTiming& step,
                                                 Clock::time_point now) {
  if (rank < 0 || rank >= world_size_ || world_size_ < 2 || step.step() == 0) return std::nullopt;
  Waiting& w = waiting_[step.step()];
  if (w.by_rank.empty()) w.by_rank.resize(static_cast<size_t>(world_size_));
  std::optional<Timing>& slot = w.by_rank[rank];
  if (!slot) ++w.have;  // a rank that started over (a new init) replaces its old timing
  Timing timing;
  timing.blocked_ns = step.blocked_ns();
  for (const v1::StepPhaseTime& p : step.phases())
    timing.phases.emplace_back(p.name(), p.busy_ns());
  slot = std::move(timing);
  std::optional<std::string> warning;
  if (w.have == world_size_) {
    warning = attribute(w, now);
    waiting_.erase(step.step());
  }
  while (waiting_.size() > kMaxWaitingSteps) waiting_.erase(waiting_.begin());
  return warning;
}

std::optional<std::string> StragglerTracker::attribute(Waiting& step, Clock::time_point now) {
  uint64_t most_blocked = 0;
  int last = 0;
  for (int r = 0; r < world_size_; ++r) {
    most_blocked = std::max(most_blocked, step.by_rank[r]->blocked_ns);
    if (step.by_rank[r]->blocked_ns < step.by_rank[last]->blocked_ns) last = r;
  }
  if (most_blocked == 0) return std::nullopt;  // nobody waited for anybody: no one was late
  ++attributed_;
  Attributed a;
  a.last = last;
  for (int r = 0; r < world_size_; ++r) {
    const double lateness = ns_seconds(most_blocked - step.by_rank[r]->blocked_ns);
    RankStats& s = ranks_[r];
    s.lateness_seconds += lateness;
    s.recent.emplace_back(lateness, r == last);
    if (s.recent.size() > kRecentSteps) s.recent.pop_front();
    if (r == last) a.lateness = lateness;
  }
  RankStats& late = ranks_[last];
  ++late.last_steps;
  for (const auto& [name, busy] : step.by_rank[last]->phases) {
    std::vector<double> others;
    for (int r = 0; r < world_size_; ++r)
      if (r != last) others.push_back(ns_seconds(busy_of(step.by_rank[r]->phases, name)));
    PhaseGrowth g{name, ns_seconds(busy), median(std::move(others))};
    PhaseSums& sums = late.phases[name];
    sums.seconds += g.seconds;
    sums.others_seconds += g.others_seconds;
    ++sums.steps;
    a.growth.push_back(std::move(g));
  }
  if (replacement_.window > 0) {
    replace_window_.emplace_back(last, a.lateness);
    if (replace_window_.size() > replacement_.window) replace_window_.pop_front();
    judge_replacement();
  }
  window_.push_back(std::move(a));
  if (window_.size() > kWarningWindow) window_.pop_front();
  return maybe_warn(now);
}

std::optional<std::string> StragglerTracker::maybe_warn(Clock::time_point now) {
  if (warning_threshold_.count() <= 0 || window_.size() < kWarningWindow) return std::nullopt;
  const double threshold = std::chrono::duration<double>(warning_threshold_).count();
  std::vector<int> late_steps(static_cast<size_t>(world_size_), 0);
  for (const Attributed& a : window_)
    if (a.lateness >= threshold) ++late_steps[a.last];
  const auto worst = std::max_element(late_steps.begin(), late_steps.end());
  const int rank = static_cast<int>(worst - late_steps.begin());
  if (static_cast<size_t>(*worst) * 2 < kWarningWindow) return std::nullopt;
  RankStats& s = ranks_[rank];
  if (s.warned && now - *s.warned < kWarningInterval) return std::nullopt;
  s.warned = now;

  std::vector<double> lateness;
  std::map<std::string, PhaseSums> phases;
  for (const Attributed& a : window_) {
    if (a.last != rank || a.lateness < threshold) continue;
    lateness.push_back(a.lateness);
    for (const PhaseGrowth& g : a.growth) {
      PhaseSums& p = phases[g.phase];
      p.seconds += g.seconds;
      p.others_seconds += g.others_seconds;
      ++p.steps;
    }
  }
  std::string text = "rank " + std::to_string(rank) + (s.host.empty() ? "" : " on " + s.host) +
                     " was last by " + ms(threshold) + " or more in " + std::to_string(*worst) +
                     " of the last " + std::to_string(kWarningWindow) + " steps, " +
                     ms(median(lateness)) + " late at the median";
  const PhaseSums* grew = nullptr;
  std::string grew_name;
  for (const auto& [name, p] : phases) {
    if (grew == nullptr || p.seconds - p.others_seconds > grew->seconds - grew->others_seconds) {
      grew = &p;
      grew_name = name;
    }
  }
  if (grew != nullptr && grew->seconds > grew->others_seconds) {
    const auto n = static_cast<double>(grew->steps);
    text += "; its phase \"" + grew_name + "\" grew most: " + ms(grew->seconds / n) + " against " +
            ms(grew->others_seconds / n) + " on the other ranks";
  }
  return text;
}

void StragglerTracker::judge_replacement() {
  replaceable_.reset();
  if (replace_window_.size() < replacement_.window) return;
  const double threshold = std::chrono::duration<double>(replacement_.threshold).count();
  std::vector<std::vector<double>> late(static_cast<size_t>(world_size_));
  for (const auto& [rank, lateness] : replace_window_)
    if (lateness >= threshold) late[rank].push_back(lateness);
  const auto worst = std::max_element(
      late.begin(), late.end(),
      [](const std::vector<double>& a, const std::vector<double>& b) { return a.size() < b.size(); });
  if (worst == late.end() || worst->size() * 2 <= replacement_.window) return;
  const int rank = static_cast<int>(worst - late.begin());
  replaceable_ = StragglerEvidence{.rank = rank,
                                   .host = ranks_[rank].host,
                                   .late_steps = static_cast<int>(worst->size()),
                                   .window = static_cast<int>(replacement_.window),
                                   .threshold_seconds = threshold,
                                   .lateness_median_seconds = median(*worst)};
}

void StragglerTracker::fill(JobTelemetry& job) const {
  job.attributed_steps = attributed_;
  job.replaceable_straggler = replaceable_;
  for (RankTelemetry& t : job.ranks) {
    if (t.rank < 0 || t.rank >= world_size_) continue;
    const RankStats& s = ranks_[t.rank];
    t.last_steps = s.last_steps;
    t.lateness_seconds = s.lateness_seconds;
    std::vector<double> all, when_last;
    all.reserve(s.recent.size());
    for (const auto& [lateness, was_last] : s.recent) {
      all.push_back(lateness);
      if (was_last) when_last.push_back(lateness);
    }
    t.lateness_p50_seconds = quantile(all, 0.5);
    t.lateness_p90_seconds = quantile(all, 0.9);
    t.lateness_p99_seconds = quantile(all, 0.99);
    t.last_lateness_median_seconds = median(std::move(when_last));
    t.phase_growth.clear();
    for (const auto& [name, p] : s.phases) {
      const auto n = static_cast<double>(std::max<uint64_t>(p.steps, 1));
      t.phase_growth.push_back(PhaseGrowth{name, p.seconds / n, p.others_seconds / n});
    }
    std::stable_sort(
        t.phase_growth.begin(), t.phase_growth.end(),
        [](const PhaseGrowth& a, const PhaseGrowth& b) { return a.growth() > b.growth(); });
  }
}

}  // namespace hvrun::coordinator::telemetry
