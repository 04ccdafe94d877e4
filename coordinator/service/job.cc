#include "coordinator/service/job.h"

#include <algorithm>
#include <iterator>

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

EngineOptions engine_options(const CoordinatorOptions& options, int world_size) {
  EngineOptions engine;
  engine.world_size = world_size;
  engine.fusion_threshold_bytes = options.fusion_threshold_bytes;
  engine.cycle_time = options.cycle_time;
  engine.cache_capacity = options.cache_capacity;
  engine.join_average_all = options.join_average_all;
  engine.op_mismatch_grace = options.op_mismatch_grace;
  return engine;
}
}  // namespace

Generation::Generation(Job& job, int n, std::vector<PlannedRank> slots, int size)
    : number(n),
      world_size(size),
      plan(std::move(slots)),
      rendezvous(size, plan, job.options_.start_timeout,
                 [this, &job](const Status& status) { job.on_rendezvous_end(*this, status); },
                 job.options_.elastic && n > 0 ? RankRules::kMembership : RankRules::kLaunch),
      loop(engine_options(job.options_, size),
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
                  .straggler_warning = options_.straggler_warning,
                  .straggler_replacement = {.threshold = options_.straggler_replace_threshold,
                                            .window = options_.straggler_replace_window}}),
      autopsies_(options_.autopsy_deadline,
                 [this](std::shared_ptr<const v1::AutopsyJobReport> report) {
                   CoordinatorEvent event{CoordinatorEvent::Kind::kAutopsy, report->trigger()};
                   event.autopsy = std::move(report);
                   emit(std::move(event));
                 }) {
  generations_.push_back(
      std::make_unique<Generation>(*this, 0, options_.plan, options_.world_size));
}

Job::~Job() {
  end(cancelled("the coordinator shut down before the job ended"));  // wakes every waiter
  std::vector<WaitingRegistration> threads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    threads.swap(waiting_registrations_);
  }
  ended_cv_.notify_all();  // parked spares wait for nothing else
  for (WaitingRegistration& t : threads) t.thread.join();
  stop_loops();
  telemetry_.finish();
}

namespace {
// Elastic: a worker started for a slot the launcher added is no rank of a generation whose
// plan lacks its slot; it waits for the next membership (the ranks take it in at their next
// commit) rather than failing in this one's rendezvous.
bool in_plan(const std::vector<PlannedRank>& plan, const v1::WorkerInfo& worker) {
  return std::any_of(plan.begin(), plan.end(), [&](const PlannedRank& p) {
    return p.host == worker.host() && p.local_rank == worker.local_rank();
  });
}

bool newcomer_to(const Generation& generation, const v1::WorkerInfo& worker) {
  return !generation.plan.empty() && !in_plan(generation.plan, worker);
}
}  // namespace

bool Job::parked_spare_locked(const Generation& now, const v1::WorkerInfo& worker) const {
  return options_.elastic && worker.spare() && newcomer_to(now, worker) &&
         !(next_plan_ && in_plan(*next_plan_, worker));
}

void Job::register_on_thread(const v1::WorkerInfo& worker, Rendezvous::Done done) {
  std::vector<WaitingRegistration> finished;
  bool started = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      started = true;
      // Threads of earlier registrations that have answered are joined here (a long elastic
      // job or many init/shutdown rounds would otherwise keep every one).
      auto answered = std::stable_partition(
          waiting_registrations_.begin(), waiting_registrations_.end(),
          [](const WaitingRegistration& w) { return !w.answered->load(); });
      std::move(answered, waiting_registrations_.end(), std::back_inserter(finished));
      waiting_registrations_.erase(answered, waiting_registrations_.end());
      auto flag = std::make_shared<std::atomic<bool>>(false);
      waiting_registrations_.push_back(
          {std::thread([this, worker, flag, done = std::move(done)] {
             done(register_worker(worker));
             flag->store(true);
           }),
           flag});
    }
  }
  for (WaitingRegistration& w : finished) w.thread.join();
  if (!started) done(cancelled("the coordinator shut down before the job ended"));
}

void Job::register_worker_async(const v1::WorkerInfo& worker, Rendezvous::Done done) {
  Generation* generation = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Generation* now = generations_.back().get();
    if (!now->resetting && !now->rendezvous.complete() &&
        !(options_.elastic && newcomer_to(*now, worker)))
      generation = now;
  }
  if (generation == nullptr) return register_on_thread(worker, std::move(done));
  generation->rendezvous.register_async(
      worker, [this, generation, worker, done = std::move(done)](Result<Registered> registered) {
        if (!registered.is_ok()) {
          bool next_membership = false;
          {
            std::lock_guard<std::mutex> lock(mutex_);
            next_membership = options_.elastic && generation->resetting && !stopping_ &&
                              (!end_.has_value() || end_->is_ok());
          }
          // A membership that ended while this worker waited sends it on to the next one.
          if (next_membership) return register_on_thread(worker, done);
          return done(registered.status());
        }
        registered->job_id = job_id_of(*generation);
        done(std::move(registered));
      });
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
  // Elastic: a membership that ends while this worker waits in its rendezvous sends the
  // registration on to the next one.
  for (;;) {
    Generation* generation = nullptr;
    Generation* previous = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      Generation* now = generations_.back().get();
      const auto limit = options_.elastic ? options_.elastic_timeout : options_.start_timeout;
      if (parked_spare_locked(*now, worker)) {
        // Parked for as long as the job runs: a spare is there for the failure that may never
        // come. Each new membership is looked at; the job's end or the server's stop wakes it.
        ended_cv_.wait(lock, [&] {
          return stopping_ || (end_.has_value() && !end_->is_ok()) ||
                 generations_.back().get() != now;
        });
        if (stopping_) return cancelled("the coordinator shut down before the job ended");
        if (end_ && !end_->is_ok()) return *end_;
        continue;
      }
      if (now->resetting) {
        // A survivor of a lost rank: the launcher names the next membership.
        ended_cv_.wait_for(lock, limit, [&] {
          return (end_.has_value() && !end_->is_ok()) || generations_.back().get() != now;
        });
        if (generations_.back().get() == now) {
          if (end_ && !end_->is_ok()) return *end_;
          return deadline_exceeded(
              "worker on host " + worker.host() + " (pid " + std::to_string(worker.pid()) +
              ") registered for the job's next membership, but none was formed within the "
              "elastic timeout (--elastic-timeout " + seconds_text(limit) + " s)");
        }
      } else if (options_.elastic && !now->rendezvous.complete() && newcomer_to(*now, worker)) {
        // Added while this membership still registers: the next one takes it in.
        ended_cv_.wait_for(lock, limit, [&] {
          return (end_.has_value() && !end_->is_ok()) || generations_.back().get() != now ||
                 now->rendezvous.complete();
        });
        if (end_ && !end_->is_ok()) return *end_;
        if (generations_.back().get() == now && !now->rendezvous.complete())
          return deadline_exceeded(
              "worker on host " + worker.host() + " (pid " + std::to_string(worker.pid()) +
              ") was started for an added slot, but no membership took it in within the "
              "elastic timeout (--elastic-timeout " + seconds_text(limit) + " s)");
        continue;  // the membership formed (its ranks take the slot in at their next commit)
      } else if (now->rendezvous.complete()) {
        // A worker registering again (init after shutdown, or a reset for added slots): the
        // next generation opens once every rank of this one said goodbye, which ends it
        // cleanly.
        const bool left = ended_cv_.wait_for(lock, limit, [&] {
          return end_.has_value() || generations_.back().get() != now;
        });
        if (generations_.back().get() == now) {
          if (!left)
            return deadline_exceeded(
                "worker on host " + worker.host() + " (pid " + std::to_string(worker.pid()) +
                ") registered again (init after shutdown), but the other ranks did not shut "
                "down within the " +
                (options_.elastic ? "elastic timeout" : "start timeout") +
                "; every rank must call shutdown() before init()");
          if (!end_->is_ok()) return *end_;
          previous = now;
          open_next_locked(*now);
        }
      }
      generation = generations_.back().get();
    }
    ended_cv_.notify_all();
    if (previous != nullptr) {
      previous->loop.stop();  // every rank left it: nothing more to plan
      if (options_.elastic) telemetry_.on_membership(generation->world_size);
    }
    auto registered = generation->rendezvous.register_worker(worker);
    if (!registered.is_ok()) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (options_.elastic && generation->resetting &&
          (!end_.has_value() || end_->is_ok()))
        continue;
      return registered.status();
    }
    registered->job_id = job_id_of(*generation);
    return registered;
  }
}

Generation& Job::open_next_locked(Generation& now) {
  std::vector<PlannedRank> plan = now.plan;
  int size = now.world_size;
  if (next_plan_) {
    plan = std::move(*next_plan_);
    size = static_cast<int>(plan.size());
    next_plan_.reset();
  }
  generations_.push_back(std::make_unique<Generation>(*this, now.number + 1, std::move(plan), size));
  Generation& next = *generations_.back();
  // Launch-time exits concern the first membership's ranks only: later ones renumber.
  if (!options_.elastic)
    for (const auto& [rank, how] : exited_) next.rendezvous.rank_exited(rank, how);
  end_.reset();
  aborting_ = false;
  abort_cause_.reset();
  departure_.reset();  // the rank that left came back (init after shutdown)
  if (options_.elastic)
    spdlog::info("membership {}: {} ranks register", next.number, next.world_size);
  else
    spdlog::info("generation {}: ranks register again (init after shutdown)", next.number);
  return next;
}

std::string Job::job_id_of(const Generation& generation) const {
  // Each membership gets fresh shared-memory segments: a lost rank may have left the last
  // one's mid-collective.
  if (!options_.elastic || generation.number == 0) return options_.job_id;
  return options_.job_id + "-m" + std::to_string(generation.number);
}

void Job::on_rendezvous_end(Generation& generation, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (generation.resetting) return;  // the membership changed while it registered
  }
  const std::string ranks = "all " + std::to_string(generation.world_size) + " ranks registered";
  if (status.is_ok()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      formed_ = generation.plan;
    }
    ended_cv_.notify_all();  // a worker of an added slot waits for this membership to form
    spdlog::info("{}", ranks);
    generation.loop.expect_streams_by(NegotiationEngine::Clock::now() + options_.start_timeout);
    emit({CoordinatorEvent::Kind::kRegistrationComplete, ranks});
  } else if (status.code() != StatusCode::kAborted && status.code() != StatusCode::kCancelled) {
    // Timed out, or the ranks that came do not fit together.
    spdlog::error("{}", status.message());
    emit({CoordinatorEvent::Kind::kRegistrationFailed, status.message()});
    end(status);
  }
}

void Job::reset(Generation& generation, const std::string& reason, int rank,
                const std::string& host) {
  spdlog::warn("membership {} ended: {}; the survivors register again", generation.number, reason);
  const Status status = unavailable("the job's membership changed: " + reason);
  generation.rendezvous.abort(status);
  generation.kv.abort(status);
  v1::JobAbort message;
  message.set_reason(reason + " (elastic job: the other ranks reset and go on)");
  message.set_rank(rank);
  message.set_host(host);
  message.set_membership_changed(true);
  generation.loop.abort(message, aborted(message.reason()));
  emit({CoordinatorEvent::Kind::kMembershipEnded, reason, rank, host});
}

void Job::change_membership(std::vector<PlannedRank> plan, const std::string& reason, int rank,
                            const std::string& host) {
  Generation* ended = nullptr;
  Generation* stopped = nullptr;  // the membership left behind: nothing more to plan there
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_ && !end_->is_ok()) return;
    if (aborting_) return;
    Generation* now = generations_.back().get();
    // Every rank of the current one already left cleanly: nothing to end.
    const bool left = end_.has_value();
    if (!now->resetting && !left) {
      now->resetting = true;
      ended = now;
    }
    next_plan_ = std::move(plan);
    open_next_locked(*now);
    stopped = now;
  }
  if (ended) reset(*ended, reason, rank, host);
  ended_cv_.notify_all();
  stopped->loop.stop();
  telemetry_.on_membership(static_cast<int>(current().world_size));
}

void Job::add_slots(std::vector<PlannedRank> plan, int added) {
  Generation* now = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if ((end_ && !end_->is_ok()) || aborting_) return;
    next_plan_ = std::move(plan);
    // Every rank said goodbye (a reset for earlier added slots, or the end of training): the
    // membership that opens next, if any, takes the plan.
    if (end_) return;
    now = generations_.back().get();
    if (now->resetting) return;  // a reset under way takes the plan when it opens
  }
  spdlog::info("{} slot(s) added; the ranks reset at their next commit", added);
  v1::CoordinatorMessage message;
  message.mutable_hosts_updated()->set_added_slots(added);
  now->loop.send_to_all(message);
}

std::vector<PlannedRank> Job::formed_membership() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return formed_;
}

std::vector<int> Job::registered_without_stream() {
  Generation& now = current();
  if (!now.rendezvous.complete()) return {};
  return now.loop.ranks_without_stream();
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
                std::optional<AbortCause> departure;
                {
                  std::lock_guard<std::mutex> lock(mutex_);
                  if (end_ || aborting_) return;
                  departure = departure_;
                }
                if (departure) {
                  // Not a clean finish: some rank's collective failed for want of that one.
                  spdlog::warn("every rank said goodbye, after {}", departure->reason);
                } else {
                  spdlog::info("every rank said goodbye; the job is finished");
                  emit({CoordinatorEvent::Kind::kJobFinished, "every rank finished cleanly"});
                }
                end(Status::ok());
              },
          .departed_rank_failed =
              [this](int rank, const std::string& message) {
                // An elastic job's survivors reset and go on without a rank that left.
                if (options_.elastic) return;
                std::string host;
                if (auto info = rank_info(rank)) host = info->host();
                // Recorded, not aborted: the waiting ranks may handle the failed collective
                // and go on, or every rank may init again. If the job fails, this is why.
                std::lock_guard<std::mutex> lock(mutex_);
                if (end_ || aborting_ || departure_) return;
                departure_ = AbortCause{message, rank, host, false, true};
                spdlog::error("{}", message);
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
  for (int r = 0; r < generation.world_size; ++r) {
    v1::AutopsyRankEntry* entry = report.add_ranks();
    entry->set_rank(r);
    if (auto info = generation.rendezvous.rank_info(r)) {
      entry->set_host(info->host());
      entry->set_pid(info->pid());
    } else if (static_cast<size_t>(r) < generation.plan.size()) {
      entry->set_host(generation.plan[static_cast<size_t>(r)].host);
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

void Job::shutdown() {
  {
    // Parked spares wait past a job that ended well: they are answered now, so that the server
    // does not wait on their calls.
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ended_cv_.notify_all();
  end(cancelled("the coordinator shut down before the job ended"));
}

void Job::worker_lost(Generation& generation, int rank) {
  std::string who = "rank " + std::to_string(rank);
  std::string host;
  if (auto info = generation.rendezvous.rank_info(rank)) {
    host = info->host();
    who += " on host " + host + " (pid " + std::to_string(info->pid()) + ")";
  }
  const std::string reason = who + " disconnected without saying goodbye (its process exited or "
                                   "was killed); see that rank's output";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (end_ || aborting_) return;
    if (options_.elastic) {
      // Streams the reset itself ends, or a membership already left behind, lose nothing.
      if (&generation != generations_.back().get() || generation.resetting) return;
      generation.resetting = true;
    }
  }
  if (options_.elastic) {
    emit({CoordinatorEvent::Kind::kWorkerLost, reason, rank, host});
    reset(generation, reason, rank, host);
    ended_cv_.notify_all();
    return;
  }
  // Abort first: every survivor's JobAbort must carry this reason, not the launcher's answer
  // to the kWorkerLost event (which would otherwise race it).
  abort(reason, rank, host);
  emit({CoordinatorEvent::Kind::kWorkerLost, reason, rank, host});
}

std::optional<AbortCause> Job::abort_cause() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Recorded before the plan that failed the waiting ranks' collectives: whatever abort
  // followed (a waiting rank's failure report) is its consequence.
  if (departure_) return departure_;
  if (abort_cause_) return abort_cause_;
  // The rendezvous records its own failure before it wakes the registering workers.
  if (auto failed = generations_.back()->rendezvous.failure()) {
    AbortCause cause{failed->message, failed->rank, "", true};
    // The current membership's plan: an elastic job's ranks renumber at each reset.
    const std::vector<PlannedRank>& plan = generations_.back()->plan;
    if (failed->rank >= 0 && static_cast<size_t>(failed->rank) < plan.size())
      cause.host = plan[static_cast<size_t>(failed->rank)].host;
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
