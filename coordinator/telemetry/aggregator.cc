#include "coordinator/telemetry/aggregator.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "coordinator/telemetry/aggregator_util.h"

namespace hvrun::coordinator::telemetry {
namespace {
constexpr std::chrono::seconds kStepRateWindow{10};
}  // namespace

using namespace detail;

Aggregator::Aggregator(Options options)
    : options_(std::move(options)),
      steady_anchor_(std::chrono::steady_clock::now()),
      wall_anchor_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()),
      ranks_(static_cast<size_t>(std::max(options_.world_size, 0))),
      stragglers_(options_.world_size, options_.straggler_warning,
                  options_.straggler_replacement) {
  membership_size_ = options_.world_size;
  for (int r = 0; r < options_.world_size; ++r) {
    ranks_[r].t.rank = r;
    ranks_[r].t.alive = false;
  }
  if (!options_.timeline_filename.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    startup_status_ = open_timeline_locked(options_.timeline_filename);
  }
}

Aggregator::~Aggregator() { finish(); }

Status Aggregator::startup_status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return startup_status_;
}

int64_t Aggregator::wall_us(TimePoint t) const {
  return wall_anchor_us_ +
         std::chrono::duration_cast<std::chrono::microseconds>(t - steady_anchor_).count();
}

Status Aggregator::open_timeline_locked(const std::string& path) {
  if (timeline_ && timeline_->path() == path) return Status::ok();
  if (timeline_) close_timeline_locked("timeline moved to " + path);
  auto writer = TimelineWriter::open(path, options_.timeline_horovod_names);
  if (!writer.is_ok()) {
    spdlog::error("{}", writer.status().message());
    return writer.status();
  }
  timeline_ = std::move(writer).value();
  spdlog::info("timeline: writing {}", path);
  ensure_process_locked(options_.world_size);
  timeline_->event(options_.world_size, "job", "timeline started", wall_us(std::chrono::steady_clock::now()),
                   -1, {{"job", options_.job_id}, {"ranks", std::to_string(options_.world_size)}},
                   'g');
  timeline_->flush(true);
  return Status::ok();
}

void Aggregator::stop_done_locked(int rank) {
  if (!stopping_) return;
  if (rank >= 0 && rank < static_cast<int>(stop_waiting_.size())) stop_waiting_[rank] = 0;
  for (uint8_t waiting : stop_waiting_)
    if (waiting) return;
  close_timeline_locked(stop_reason_);
}

void Aggregator::close_timeline_locked(const std::string& why) {
  stopping_ = false;
  if (!timeline_) return;
  timeline_->event(options_.world_size, "job", "timeline stopped",
                   wall_us(std::chrono::steady_clock::now()), -1, {{"why", why}}, 'g');
  timeline_->close();
  spdlog::info("timeline: {} closed ({} events; {})", timeline_->path(), timeline_->events_written(),
               why);
  timeline_.reset();
}

void Aggregator::ensure_process_locked(int pid) {
  if (!timeline_ || timeline_->process_named(pid)) return;
  if (pid == options_.world_size) {
    timeline_->name_process(pid, "coordinator", -1);
    return;
  }
  std::string name = "rank " + std::to_string(pid);
  if (pid >= 0 && pid < static_cast<int>(ranks_.size()) && !ranks_[pid].t.host.empty())
    name += " (" + ranks_[pid].t.host + ")";
  timeline_->name_process(pid, name, pid);
}

std::vector<std::shared_ptr<StreamSink>> Aggregator::sinks_locked() const {
  std::vector<std::shared_ptr<StreamSink>> sinks;
  for (const RankState& r : ranks_)
    if (r.sink) sinks.push_back(r.sink);
  return sinks;
}

void Aggregator::tell(const std::vector<std::shared_ptr<StreamSink>>& sinks, bool recording) {
  if (sinks.empty()) return;
  v1::CoordinatorMessage message;
  message.mutable_timeline()->set_recording(recording);
  const auto bytes = serialize(message);
  for (const auto& sink : sinks) sink->send(bytes);
}

void Aggregator::on_attached(int rank, std::shared_ptr<StreamSink> sink,
                             const std::string& host, int local_rank) {
  bool recording = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
    RankState& r = ranks_[rank];
    r.t.host = host;
    r.t.local_rank = local_rank;
    r.t.alive = true;
    stragglers_.set_host(rank, host);
    r.sink = sink;
    recording = timeline_ != nullptr && !stopping_;
  }
  // Workers of a job started with --timeline-filename record from their first collective (the
  // setting reaches them at registration); tell them when it has been stopped since.
  if (recording || !options_.timeline_filename.empty()) tell({sink}, recording);
}

void Aggregator::on_goodbye(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  ranks_[rank].t.alive = false;
  ranks_[rank].sink.reset();
  stop_done_locked(rank);
}

void Aggregator::on_lost(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  ranks_[rank].t.alive = false;
  ranks_[rank].sink.reset();
  if (timeline_) {
    ensure_process_locked(rank);
    timeline_->event(rank, "job", "lost", wall_us(std::chrono::steady_clock::now()), -1,
                     {{"why", "stream ended without Goodbye"}}, 'p');
    timeline_->flush(true);
  }
  stop_done_locked(rank);
}

void Aggregator::on_report(int rank, const v1::TelemetryReport& report) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  RankState& r = ranks_[rank];
  r.reported = true;
  r.last_report = now;
  r.t.collectives.clear();
  for (const v1::CollectiveStats& c : report.collectives()) {
    CollectiveTotals totals;
    totals.op = op_text(c.op());
    totals.backend = c.backend();
    totals.tensors = c.tensors();
    totals.responses = c.responses();
    totals.bytes = c.bytes();
    totals.collective_seconds = static_cast<double>(c.collective_ns()) * 1e-9;
    totals.pack_seconds = static_cast<double>(c.pack_ns()) * 1e-9;
    totals.unpack_seconds = static_cast<double>(c.unpack_ns()) * 1e-9;
    totals.queue_seconds = static_cast<double>(c.queue_ns()) * 1e-9;
    r.t.collectives.push_back(std::move(totals));
  }
  r.t.steps = report.steps();
  r.step_samples.emplace_back(now, report.steps());
  while (r.step_samples.size() > 2 && now - r.step_samples.front().first > kStepRateWindow)
    r.step_samples.pop_front();
  const auto& [first_time, first_steps] = r.step_samples.front();
  const double span = seconds(now - first_time);
  r.t.step_rate = span > 0.2 && report.steps() >= first_steps
                      ? static_cast<double>(report.steps() - first_steps) / span
                      : r.t.step_rate;
  for (const v1::StepTiming& step : report.step_timings()) {
    if (auto warning = stragglers_.add(rank, step, now)) spdlog::warn("straggler: {}", *warning);
  }
  r.t.gpus.clear();
  for (const v1::GpuSample& g : report.gpus()) {
    r.t.gpus.push_back(GpuTelemetry{g.index(), g.name(), g.pci_bus_id(), g.utilization_percent(),
                                    g.memory_used_bytes(), g.memory_total_bytes(),
                                    g.temperature_celsius(), g.power_watts()});
  }
  if (timeline_ && report.events_size() > 0) {
    ensure_process_locked(rank);
    TimelineArgs args;
    for (const v1::TimelineEvent& e : report.events()) {
      args.assign(e.args().begin(), e.args().end());
      std::sort(args.begin(), args.end());
      timeline_->event(rank, e.lane(), e.name(), e.start_unix_us(), e.duration_us(), args);
    }
    timeline_->flush();
  }
  if (!report.timeline_recording()) stop_done_locked(rank);
}

void Aggregator::on_timeline_control(int rank, const std::string& filename) {
  std::vector<std::shared_ptr<StreamSink>> sinks;
  bool recording = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    const bool was = timeline_ != nullptr && !stopping_;
    if (filename.empty()) {
      if (timeline_ && !stopping_) {
        // Wait for every attached rank's last events (their reports after the stop).
        stopping_ = true;
        stop_reason_ = "stopped by rank " + std::to_string(rank);
        stop_waiting_.assign(ranks_.size(), 0);
        for (size_t r = 0; r < ranks_.size(); ++r) stop_waiting_[r] = ranks_[r].sink ? 1 : 0;
        stop_done_locked(-1);  // nobody attached: close now
      }
    } else {
      if (stopping_ && timeline_ && timeline_->path() != filename)
        close_timeline_locked("timeline moved to " + filename);
      stopping_ = false;
      (void)open_timeline_locked(filename);  // a failure is logged; recording stays as it was
    }
    recording = timeline_ != nullptr && !stopping_;
    if (recording != was || recording) sinks = sinks_locked();
  }
  tell(sinks, recording);
}

void Aggregator::on_abort(const std::string& reason, int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!timeline_) return;
  ensure_process_locked(options_.world_size);
  timeline_->event(options_.world_size, "job", "abort", wall_us(std::chrono::steady_clock::now()),
                   -1, {{"reason", reason}, {"rank", std::to_string(rank)}}, 'g');
  timeline_->flush(true);
}

void Aggregator::on_membership(int world_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  membership_size_ = world_size;
  if (ranks_.size() < static_cast<size_t>(world_size)) {
    const size_t first = ranks_.size();
    ranks_.resize(static_cast<size_t>(world_size));
    for (size_t r = first; r < ranks_.size(); ++r) {
      ranks_[r].t.rank = static_cast<int>(r);
      ranks_[r].t.alive = false;
    }
  }
  for (size_t r = 0; r < ranks_.size(); ++r) {
    // Every rank registers again and its step count restarts: earlier reports tell nothing of
    // the new membership's pace.
    ranks_[r].reported = false;
    ranks_[r].step_samples.clear();
    if (r >= static_cast<size_t>(world_size)) ranks_[r].t.alive = false;
  }
  stragglers_.reset_membership(world_size);
}

JobTelemetry Aggregator::snapshot() const {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  JobTelemetry job;
  job.job_id = options_.job_id;
  job.world_size = membership_size_;
  job.fusion_threshold_bytes = options_.fusion_threshold_bytes;
  job.fused_responses = fused_responses_;
  job.fused_bytes = fused_bytes_;
  job.plans = plans_;
  job.timeline_recording = timeline_ != nullptr && !stopping_;
  bool any_steps = false;
  for (const RankState& r : ranks_) {
    RankTelemetry t = r.t;
    t.seconds_since_report = r.reported ? seconds(now - r.last_report) : -1;
    job.ranks_alive += t.alive ? 1 : 0;
    job.ranks_joined += t.joined ? 1 : 0;
    if (r.reported) {
      job.steps = any_steps ? std::min(job.steps, t.steps) : t.steps;
      job.step_rate = any_steps ? std::min(job.step_rate, t.step_rate) : t.step_rate;
      any_steps = true;
    }
    job.ranks.push_back(std::move(t));
  }
  stragglers_.fill(job);
  return job;
}

void Aggregator::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  close_timeline_locked("job ended");
}

}  // namespace hvrun::coordinator::telemetry
