#include "coordinator/service/job.h"

#include <spdlog/spdlog.h>

#include <cstdio>

namespace hvrun::coordinator::service {

namespace {
// "2.5" for 2500 ms: seconds as people write them in messages.
std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

EngineOptions engine_options(const CoordinatorOptions& options) {
  EngineOptions engine;
  engine.world_size = options.world_size;
  engine.fusion_threshold_bytes = options.fusion_threshold_bytes;
  engine.cycle_time = options.cycle_time;
  engine.cache_capacity = options.cache_capacity;
  engine.join_average_all = options.join_average_all;
  return engine;
}
}  // namespace

Generation::Generation(Job& job, int n)
    : number(n),
      rendezvous(job.options_.world_size, job.options_.plan, job.options_.start_timeout,
                 [this, &job](const Status& status) { job.on_rendezvous_end(*this, status); }),
      loop(engine_options(job.options_),
           {.warning = job.options_.stall_warning,
            .shutdown = job.options_.stall_shutdown,
            .heartbeat_timeout = job.options_.heartbeat_timeout},
           job.loop_hooks()) {}

Job::Job(CoordinatorOptions options, CoordinatorServer::EventCallback on_event)
    : options_(std::move(options)),
      events_(std::move(on_event)),
      telemetry_({.job_id = options_.job_id,
                  .world_size = options_.world_size,
                  .fusion_threshold_bytes = options_.fusion_threshold_bytes,
                  .timeline_filename = options_.timeline_filename,
                  .timeline_horovod_names = options_.timeline_horovod_names,
                  .straggler_warning = options_.straggler_warning}),
      autopsies_(options_.autopsy_deadline,
                 [this](std::shared_ptr<const v1::AutopsyJobReport> report) {
                   CoordinatorEvent event{CoordinatorEvent::Kind::kAutopsy, report->trigger()};
                   event.autopsy = std::move(report);
                   emit(std::move(event));
                 }) {
  generations_.push_back(std::make_unique<Generation>(*this, 0));
}

Job::~Job() {
  stop_loops();
  telemetry_.finish();
}

Generation& Job::current() {
  std::lock_guard<std::mutex> lock(mutex_);
  return *generations_.back();
}

std::optional<v1::RankInfo> Job::rank_info(int rank) { return current().rendezvous.rank_info(rank); }

void Job::stop_loops() {
  std::vector<Generation*> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& g : generations_) all.push_back(g.get());
  }
  for (Generation* g : all) g->loop.stop();
}

Result<Registered> Job::register_worker(const v1::WorkerInfo& worker) {
  Generation* generation = nullptr;
  Generation* previous = nullptr;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    Generation* now = generations_.back().get();
    if (now->rendezvous.complete()) {
      // A worker registering again (init after shutdown): the next generation opens once every
      // rank of this one said goodbye, which ends it cleanly.
      const bool left = ended_cv_.wait_for(lock, options_.start_timeout, [&] {
        return end_.has_value() || generations_.back().get() != now;
      });
      if (generations_.back().get() == now) {
        if (!left)
          return deadline_exceeded(
              "worker on host " + worker.host() + " (pid " + std::to_string(worker.pid()) +
              ") registered again (init after shutdown), but the other ranks did not shut down "
              "within the start timeout; every rank must call shutdown() before init()");
        if (!end_->is_ok()) return *end_;
        previous = now;
        generations_.push_back(std::make_unique<Generation>(*this, now->number + 1));
        for (const auto& [rank, how] : exited_) generations_.back()->rendezvous.rank_exited(rank, how);
        end_.reset();
        aborting_ = false;
        abort_cause_.reset();
        spdlog::info("generation {}: ranks register again (init after shutdown)",
                     generations_.back()->number);
      }
    }
    generation = generations_.back().get();
  }
  ended_cv_.notify_all();
  if (previous != nullptr) previous->loop.stop();  // every rank left it: nothing more to plan
  return generation->rendezvous.register_worker(worker);
}

void Job::on_rendezvous_end(Generation& generation, const Status& status) {
  if (status.is_ok()) {
    spdlog::info("all {} ranks registered", options_.world_size);
    generation.loop.expect_streams_by(NegotiationEngine::Clock::now() + options_.start_timeout);
    emit({CoordinatorEvent::Kind::kRegistrationComplete,
          "all " + std::to_string(options_.world_size) + " ranks registered"});
  } else if (status.code() != StatusCode::kAborted && status.code() != StatusCode::kCancelled) {
    // Timed out, or the ranks that came do not fit together.
    spdlog::error("{}", status.message());
    emit({CoordinatorEvent::Kind::kRegistrationFailed, status.message()});
    end(status);
  }
}

NegotiationLoop::Hooks Job::loop_hooks() {
  return {.protocol_error =
              [this](int rank, const Status& error) {
                std::string host;
                if (auto info = rank_info(rank)) host = info->host();
                abort("rank " + std::to_string(rank) + " broke the negotiation protocol: " +
                          error.message(),
                      rank, host);
              },
          .streams_missing =
              [this](const std::vector<int>& ranks) {
                std::string who;
                for (int r : ranks) {
                  if (!who.empty()) who += ", ";
                  who += "rank " + std::to_string(r);
                  if (auto info = rank_info(r)) {
                    who += " (host " + info->host() + ", pid " + std::to_string(info->pid()) + ")";
                  }
                }
                abort(who + " registered but did not open the negotiation stream within the "
                            "start timeout; did the worker crash or hang during init?",
                      ranks.front(), "");
              },
          .everyone_left =
              [this] {
                spdlog::info("every rank said goodbye; the job is finished");
                emit({CoordinatorEvent::Kind::kJobFinished, "every rank finished cleanly"});
                end(Status::ok());
              },
          .stalled =
              [this](const std::string& message, int rank) {
                std::string host;
                if (auto info = rank_info(rank)) host = info->host();
                abort_after_autopsy("stall shutdown (--stall-check-shutdown-time-seconds " +
                                        seconds_text(options_.stall_shutdown) + ")",
                                    "stall shutdown (--stall-check-shutdown-time-seconds " +
                                        seconds_text(options_.stall_shutdown) + "): " + message,
                                    rank, host);
              },
          .silent =
              [this](int rank, std::chrono::milliseconds quiet) {
                std::string who = "rank " + std::to_string(rank);
                std::string host;
                if (auto info = rank_info(rank)) {
                  host = info->host();
                  who += " on host " + host + " (pid " + std::to_string(info->pid()) + ")";
                }
                abort_after_autopsy(
                    "heartbeat timeout (--heartbeat-timeout " +
                        seconds_text(options_.heartbeat_timeout) + ")",
                    who + " sent no heartbeat for " + seconds_text(quiet) +
                        " s (--heartbeat-timeout " + seconds_text(options_.heartbeat_timeout) +
                        " s): the process is stopped or hung, or its host or network is down",
                    rank, host);
              },
          .stall_warned =
              [this] {
                if (!options_.autopsy_on_stall) return;
                // A job stuck for long warns about tensor after tensor: one autopsy tells it.
                constexpr std::chrono::minutes kStallAutopsyInterval{5};
                const auto now = std::chrono::steady_clock::now();
                {
                  std::lock_guard<std::mutex> lock(mutex_);
                  if (stall_autopsy_at_ && now - *stall_autopsy_at_ < kStallAutopsyInterval)
                    return;
                  stall_autopsy_at_ = now;
                }
                autopsy("stall warning (--stall-check-warning-time-seconds " +
                        seconds_text(options_.stall_warning) + ")");
              },
          .rank_label = [this](int rank) -> std::string {
            auto info = rank_info(rank);
            if (!info) return "";
            return "host " + info->host() + ", pid " + std::to_string(info->pid());
          },
          .observer = &telemetry_};
}

void Job::emit(CoordinatorEvent event) { events_.post(std::move(event)); }

void Job::abort_after_autopsy(const std::string& trigger, const std::string& reason, int rank,
                              const std::string& host) {
  if (abort_awaits_autopsy_) return;  // asked again while its autopsy runs
  auto end_job = [this, reason, rank, host] { abort(reason, rank, host); };
  if (options_.autopsy_on_stall && autopsy(trigger, end_job)) {
    abort_awaits_autopsy_ = true;
    return;
  }
  end_job();
}

bool Job::autopsy(const std::string& trigger, std::function<void()> then) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_ || aborting_) return false;
  }
  Generation& generation = current();
  v1::AutopsyJobReport report;
  report.set_job_id(options_.job_id);
  report.set_trigger(trigger);
  report.set_unix_us(std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
  for (int r = 0; r < options_.world_size; ++r) {
    v1::AutopsyRankEntry* entry = report.add_ranks();
    entry->set_rank(r);
    if (auto info = generation.rendezvous.rank_info(r)) {
      entry->set_host(info->host());
      entry->set_pid(info->pid());
    } else if (static_cast<size_t>(r) < options_.plan.size()) {
      entry->set_host(options_.plan[static_cast<size_t>(r)].host);
    }
  }
  for (const StalledTensor& waiting : generation.loop.waiting_tensors()) {
    if (waiting.missing_ranks.empty()) continue;
    v1::AutopsyStall* stall = report.add_stalls();
    stall->set_name(waiting.name);
    stall->set_op(waiting.op);
    stall->set_waited_seconds(std::chrono::duration<double>(waiting.waited).count());
    stall->set_process_set_id(waiting.process_set_id);
    for (int r : waiting.missing_ranks) {
      stall->add_missing_ranks(r);
      if (r >= 0 && r < report.ranks_size()) report.mutable_ranks(r)->add_missing_tensors(waiting.name);
    }
    for (int r : waiting.submitted_ranks) stall->add_submitted_ranks(r);
  }
  std::optional<v1::AutopsyRequest> request = autopsies_.begin(std::move(report), std::move(then));
  if (!request) return false;
  spdlog::info("autopsy {}: {}; asking every rank", request->id(), trigger);
  v1::CoordinatorMessage message;
  *message.mutable_autopsy() = *request;
  generation.loop.send_to_all(message);
  return true;
}

void Job::on_autopsy_report(int rank, const v1::AutopsyReport& report) {
  autopsies_.on_report(rank, report);
}

void Job::end(Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_) return;
    end_ = status;
  }
  ended_cv_.notify_all();
  if (!status.is_ok()) {
    Generation& generation = current();
    generation.rendezvous.abort(status);
    generation.kv.abort(status);
    v1::JobAbort message;
    message.set_reason(status.message());
    message.set_rank(-1);
    generation.loop.abort(message, status);
  }
}

void Job::abort(const std::string& reason, int rank, const std::string& host) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_ || aborting_) return;
    aborting_ = true;
    abort_cause_ = AbortCause{reason, rank, host};
  }
  spdlog::error("job aborted: {}", reason);
  telemetry_.on_abort(reason, rank);
  // Streams first, so every worker hears the reason before anything else ends.
  v1::JobAbort message;
  message.set_reason(reason);
  message.set_rank(rank);
  message.set_host(host);
  const Status status = aborted(reason);
  current().loop.abort(message, status);
  emit({CoordinatorEvent::Kind::kAborted, reason, rank, host});
  end(status);
}

void Job::shutdown() { end(cancelled("the coordinator shut down before the job ended")); }

void Job::worker_lost(int rank) {
  std::string who = "rank " + std::to_string(rank);
  std::string host;
  if (auto info = rank_info(rank)) {
    host = info->host();
    who += " on host " + host + " (pid " + std::to_string(info->pid()) + ")";
  }
  const std::string reason = who + " disconnected without saying goodbye (its process exited or "
                                   "was killed); see that rank's output";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_ || aborting_) return;
  }
  // Abort first: every survivor's JobAbort must carry this reason, not the launcher's answer
  // to the kWorkerLost event (which would otherwise race it).
  abort(reason, rank, host);
  emit({CoordinatorEvent::Kind::kWorkerLost, reason, rank, host});
}

std::optional<AbortCause> Job::abort_cause() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (abort_cause_) return abort_cause_;
  // The rendezvous records its own failure before it wakes the registering workers.
  if (auto failed = generations_.back()->rendezvous.failure()) {
    AbortCause cause{failed->message, failed->rank, "", true};
    if (failed->rank >= 0 && static_cast<size_t>(failed->rank) < options_.plan.size())
      cause.host = options_.plan[static_cast<size_t>(failed->rank)].host;
    return cause;
  }
  return std::nullopt;
}

void Job::worker_exited(int rank, const std::string& how) {
  Generation* generation = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exited_.emplace_back(rank, how);
    generation = generations_.back().get();
  }
  generation->rendezvous.rank_exited(rank, how);
}

std::optional<Status> Job::end_status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_;
}

std::optional<Status> Job::wait_for_end(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  ended_cv_.wait_for(lock, timeout, [&] { return end_.has_value(); });
  return end_;
}

}  // namespace hvrun::coordinator::service
