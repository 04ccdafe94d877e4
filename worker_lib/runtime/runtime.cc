#include "worker_lib/runtime/runtime.h"

#include <unistd.h>

#include <filesystem>
#include <utility>

#include "common/logging.h"
#include "worker_lib/config_environment.h"
#include "worker_lib/runtime/cpu_backend_factory.h"
#include "worker_lib/runtime/private_coordinator.h"
#include "worker_lib/runtime/registration.h"
#include "worker_lib/telemetry/gpu_sampler.h"

namespace hvrun::detail {
namespace {

constexpr std::chrono::seconds kGoodbyeTimeout{5};

std::string local_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

Runtime::Runtime(const Config& config) : config_(config) {
  if (config_.host.empty()) config_.host = local_host_name();
}

Runtime::~Runtime() { (void)shutdown(); }

Result<std::unique_ptr<Runtime>> Runtime::start(const Config& given) {
  HVRUN_RETURN_IF_ERROR(logging::init("worker", given.log_level, given.log_timestamps));
  for (const std::string& note : given.environment_notes) SPDLOG_INFO("{}", note);
  if (!given.environment_warning.empty()) SPDLOG_WARN("{}", given.environment_warning);
  Config config = given;
  const bool own_coordinator = config.private_coordinator && config.coordinator_address.empty();
  if (config.coordinator_address.empty() && !own_coordinator)
    return invalid_argument("hvrun worker: no coordinator address (HVRUN_COORDINATOR_ADDR); "
                            "start the trainer with hvrun, or fill Config::coordinator_address");
  // A single process has one job of its own: a second init() while it lives is refused as for
  // any job, before a second coordinator is started.
  HVRUN_ASSIGN_OR_RETURN(auto claim, LiveWorkerClaim::claim(own_coordinator
                                                                ? "its own (no launcher)"
                                                                : config.coordinator_address));
  std::unique_ptr<PrivateCoordinator> own;
  if (own_coordinator) {
    HVRUN_ASSIGN_OR_RETURN(own, PrivateCoordinator::start(executable_search_path(),
                                                          config.secret, config.start_timeout));
    config.coordinator_address = own->address();
    config.secret = own->secret();
    config.job_id.clear();  // the private coordinator names its own job
    config.requested_rank = 0;
    config.local_rank = 0;
    SPDLOG_INFO("no launcher (HVRUN_COORDINATOR_ADDR is not set): running as a single process, "
                "a job of size 1, with a coordinator of its own ({}, pid {})",
                own->program(), own->pid());
  }
  std::unique_ptr<Runtime> runtime(new Runtime(config));
  runtime->private_coordinator_ = std::move(own);
  runtime->claim_ = std::move(claim);
  HVRUN_RETURN_IF_ERROR(runtime->connect());
  runtime->claim_->set_identity(runtime->topology_.rank, runtime->job_id_);
  return runtime;
}

Status Runtime::connect() {
  client_ = std::make_unique<CoordinatorClient>(config_.coordinator_address, config_.secret);
  HVRUN_ASSIGN_OR_RETURN(Registration registered, register_worker(config_, *client_));
  topology_ = registered.topology;
  job_id_ = registered.response.job_id();
  logging::set_rank(topology_.rank);
  SPDLOG_DEBUG("registered as rank {} of {} (job {})", topology_.rank, topology_.size, job_id_);

  // Shared memory within a host, Gloo across hosts (see cpu_backend_factory.h).
  HVRUN_ASSIGN_OR_RETURN(CpuDataPlane plane,
                         make_cpu_backend_for_job(config_, registered, *client_));
  backend_ = std::move(plane.backend);
  executor_ = std::make_unique<PlanExecutor>(*backend_, topology_.rank, topology_.size);
  executor_->set_failure_explainer([this](Status failed) {
    return state_.explain_failure(std::move(failed));
  });
  // CUDA tensors: NCCL, set up by the first CUDA response (backends/nccl/gpu_executor.h).
  auto gpu = std::make_unique<GpuExecutor>(GpuJob{.rank = topology_.rank,
                                                  .size = topology_.size,
                                                  .local_rank = topology_.local_rank,
                                                  .host = config_.host,
                                                  .op_timeout = config_.op_timeout,
                                                  .setup_timeout = config_.start_timeout,
                                                  .store = client_.get(),
                                                  .allocator = config_.device_allocator,
                                                  .host_plane = config_.device_plane == "host"});
  gpu_ = gpu.get();
  executor_->set_gpu_executor(std::move(gpu));
  ProcessSetPlanes::Job set_job{.rank = topology_.rank,
                                .size = topology_.size,
                                .local_rank = topology_.local_rank,
                                .hosts = registered.hosts,
                                .job_id = job_id_,
                                .config = &config_,
                                .store = client_.get(),
                                .explain_failure = [this](Status failed) {
                                  return state_.explain_failure(std::move(failed));
                                },
                                .observer = nullptr};
  // A coordinator that gives no placement leaves it unknown: a host per rank, so that sets use
  // Gloo, as the job does then.
  if (set_job.hosts.empty()) {
    for (int r = 0; r < topology_.size; ++r) set_job.hosts.push_back("unknown-host-" + std::to_string(r));
    set_job.gloo_only = true;
  }
  // Telemetry counts CPU responses under the backend's short name ("hierarchical(shm+gloo)"
  // -> "hierarchical"); a one-rank job moves nothing ("local").
  std::string backend_name = topology_.size == 1 ? "local" : backend_->name();
  backend_name = backend_name.substr(0, backend_name.find('('));
  telemetry_ = std::make_unique<telemetry::WorkerTelemetry>(backend_name);
  executor_->set_phase_observer(telemetry_.get(), backend_name);
  if (config_.telemetry.flight_recorder_size > 0) {
    recorder_ = std::make_unique<FlightRecorder>(config_.telemetry.flight_recorder_size,
                                                 backend_name);
    executor_->set_flight_recorder(recorder_.get());
    set_job.recorder = recorder_.get();
  }
  set_job.observer = telemetry_.get();
  process_sets_ = std::make_unique<ProcessSetPlanes>(std::move(set_job));
  // Record from the first collective (TimelineState follows Welcome, which may be after the
  // trainer's first submissions).
  if (registered.timeline_from_start) telemetry_->set_recording(true);
  // Created before the reader thread (which may ask it for a report), started once the
  // stream is open (start_telemetry).
  constexpr std::chrono::milliseconds kReportInterval{500};  // when something changed
  reporter_ = std::make_unique<telemetry::ReportSender>(
      *telemetry_, [this](const v1::WorkerMessage& m) { return stream_->write(m); },
      kReportInterval,
      [visible = config_.telemetry.cuda_visible_devices] { return telemetry::sample_gpus(visible); });
  // Refusals go to the agreement even with the fast path off here: a peer whose setting
  // differs then falls back at once instead of at its deadline.
  RoundAgreement* rounds = topology_.size < 2 ? nullptr : plane.rounds;
  lane_.set_rounds(rounds);

  stream_ = client_->open_stream();
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(topology_.rank);
  if (!stream_->write(hello)) {
    Status finished = stream_->finish();
    return unavailable("rank " + std::to_string(topology_.rank) +
                       ": could not open the negotiation stream to the coordinator at " +
                       config_.coordinator_address + ": " + finished.to_string());
  }
  submitter_ = std::make_unique<Submitter>(state_, lane_, *stream_, *telemetry_, topology_.rank);
  submitter_->set_flight_recorder(recorder_.get());
  fast_path_ = std::make_unique<FastPath>(
      FastPath::Context{state_, lane_, *submitter_, executor_->cpu(), *telemetry_,
                        topology_.size, config_.op_timeout, config_.fast_path, recorder_.get()},
      rounds);
  cached_rounds_ = std::make_unique<CachedRounds>(
      CachedRounds::Context{state_, lane_, *submitter_, *executor_, *telemetry_, *fast_path_,
                            topology_.size, registered.fusion_threshold_bytes},
      rounds);
  plan_runner_ = std::make_unique<PlanRunner>(
      PlanRunner::Context{state_, lane_, *submitter_, *cached_rounds_, *executor_,
                          *process_sets_, *telemetry_, *stream_, *client_, topology_.rank,
                          config_.host, config_.coordinator_address, registered.cycle_time});
  if (plan_runner_->gathering())
    HVRUN_RETURN_IF_ERROR(submitter_->let_batches_gather(registered.cycle_time));
  heartbeat_ = std::make_unique<Heartbeat>(
      *stream_,
      registered.heartbeat_timeout ? Heartbeat::interval_for(*registered.heartbeat_timeout)
                                   : std::chrono::milliseconds(1000),
      plan_runner_->finished_plan_seq());
  autopsy_ = std::make_unique<AutopsyResponder>(AutopsyResponder::Context{
      .recorder = recorder_.get(),
      .send = [this](const v1::WorkerMessage& m) { return stream_->write(m); },
      .rank = topology_.rank,
      .host = config_.host});
  reader_ = std::make_unique<StreamReader>(StreamReader::Context{
      state_, *stream_, *telemetry_, *reporter_,
      [this](const std::string& reason) { tear_down(reason); },
      [this] { heartbeat_->stop(); }, topology_.rank, config_.coordinator_address,
      [this](const v1::AutopsyRequest& request) { autopsy_->request(request); }});
  reader_->start();
  plan_runner_->start();
  heartbeat_->start();
  start_telemetry();
  return Status::ok();
}

void Runtime::tear_down(const std::string& reason) {
  if (executor_) executor_->abort(reason);
  if (process_sets_) process_sets_->abort(reason);
}

void Runtime::start_telemetry() {
  // Timeline events piling up are sent at once instead of at the next half-second report.
  constexpr size_t kPileUp = 4096;
  telemetry_->set_pile_up_callback(kPileUp, [sender = reporter_.get()] { sender->wake(); });
  telemetry::register_for_steps(telemetry_.get());
  reporter_->start();
}

Status Runtime::send_timeline_control(const std::string& filename) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    if (state_.terminal) return *state_.terminal;
  }
  if (!stream_) return failed_precondition("hvrun worker is not connected to a coordinator");
  v1::WorkerMessage message;
  message.mutable_timeline()->set_filename(filename);
  if (!stream_->write(message))
    return unavailable("rank " + std::to_string(topology_.rank) +
                       ": could not reach the coordinator to start/stop the timeline (the "
                       "negotiation stream is closed)");
  return Status::ok();
}

Status Runtime::start_timeline(const std::string& path) {
  if (path.empty())
    return invalid_argument("start_timeline: empty file name; give the JSON file to write");
  // The coordinator writes the file: make a relative name mean this worker's directory (the
  // same place on a single-host job; on a multi-host job, a path on the launch host).
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return send_timeline_control(error ? path : absolute.string());
}

Status Runtime::stop_timeline() { return send_timeline_control(""); }

Result<ProcessSetMembers> Runtime::process_set_of_mine(const ProcessSet& set,
                                                       const std::string& op_text) const {
  if (set.id < 0)
    return invalid_argument(op_text + ": process set id " + std::to_string(set.id) + " is negative");
  std::optional<ProcessSetMembers> members = process_sets_->members(static_cast<uint32_t>(set.id));
  if (!members)
    return invalid_argument(op_text + ": there is no process set " + std::to_string(set.id) +
                            " (add_process_set returns the ids; a removed set's id is gone)");
  if (process_sets_->removing(static_cast<uint32_t>(set.id)))
    return invalid_argument(op_text + ": process set " + std::to_string(set.id) +
                            " is being removed (this rank called remove_process_set)");
  if (!members->includes_me())
    return invalid_argument(op_text + ": rank " + std::to_string(topology_.rank) +
                            " is not in process set " + std::to_string(set.id) + " (ranks " +
                            members->ranks_text() +
                            "); only its members submit its collectives");
  return *members;
}

uint64_t Runtime::next_barrier_id(uint32_t process_set) {
  std::lock_guard<std::mutex> lock(state_.mutex);
  return state_.barrier_counter[process_set]++;
}

uint64_t Runtime::next_group_id(uint32_t process_set) {
  std::lock_guard<std::mutex> lock(state_.mutex);
  return ++state_.group_counter[process_set];
}

void Runtime::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    if (state_.terminal || state_.abort_reason) return;
    state_.abort_reason = reason;
  }
  state_.wake.notify_all();
  // The background thread may be inside a collective (it sends the AbortRequest only between
  // operations): tear this rank's data planes down now so that collective fails at once.
  tear_down("job aborted: " + reason + " (rank " + std::to_string(topology_.rank) + ")");
}

Status Runtime::shutdown(const std::optional<std::string>& failure) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    if (state_.shut_down) return Status::ok();
    state_.shut_down = true;
  }
  if (!plan_runner_ || !plan_runner_->started()) {  // never started
    claim_.reset();
    return Status::ok();
  }
  // Before anything else: the peers must learn this rank's failure before its data plane
  // goes away under them, so that the job's abort names the cause, not a consequence.
  const bool reported_failure = failure && report_failure(*failure);
  if (lane_.rounds()) lane_.rounds()->leave();  // peers in a fast round, now or later, fall back
  state_.terminate(cancelled("hvrun worker rank " + std::to_string(topology_.rank) +
                             " shut down before this collective completed"));
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    state_.terminal = failed_precondition("hvrun worker rank " + std::to_string(topology_.rank) +
                                          " was shut down; no more collectives can be submitted");
    state_.stop_requested = true;
  }
  state_.wake.notify_all();
  plan_runner_->join();
  submitter_->stop_batch_timer();  // nothing can be submitted any more
  release_peers_of_skipped_plans();
  autopsy_->stop();  // no report after Goodbye
  heartbeat_->stop();
  heartbeat_->join();

  // The last telemetry report (final counters, the timeline's tail) goes before Goodbye.
  reporter_->flush_and_stop();
  telemetry::unregister_for_steps(telemetry_.get());

  // The loop and the heartbeat have stopped, but an API thread may still be inside
  // flush_outbox() with a batch it took: the sender's lock lets it finish before Goodbye, and
  // write_last() refuses anything written after.
  submitter_->exclusive([&] {
    v1::WorkerMessage goodbye;
    goodbye.mutable_goodbye();
    // A rank that reported its failure leaves without Goodbye: it did not finish cleanly.
    if (reported_failure ? !stream_->close_writes() : !stream_->write_last(goodbye))
      SPDLOG_DEBUG("Goodbye not delivered (stream already closed)");
  });
  {
    std::unique_lock<std::mutex> lock(state_.mutex);
    if (!state_.wake.wait_for(lock, kGoodbyeTimeout, [&] { return state_.stream_ended; })) {
      SPDLOG_WARN("coordinator did not close the stream within {} s after Goodbye; cancelling",
                  kGoodbyeTimeout.count());
      stream_->cancel();
    }
  }
  reader_->join();
  release_peers_of_skipped_plans();  // plans that arrived after the loop stopped
  (void)stream_->finish();  // cancelled or aborted streams end with an error: nothing to do
  claim_.reset();  // this process may init() again
  if (private_coordinator_) private_coordinator_->wait_for_exit();  // it ends on Goodbye
  return Status::ok();
}

bool Runtime::report_failure(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(state_.mutex);
    // The job already failed (this rank's error may well be its consequence): the coordinator
    // knows the cause and another report would only compete with it.
    if (state_.terminal || state_.abort_reason) return false;
  }
  v1::WorkerMessage message;
  v1::AbortRequest* a = message.mutable_abort();
  a->set_reason("rank " + std::to_string(topology_.rank) + " on host " + config_.host + " (pid " +
                std::to_string(getpid()) + ") failed: " + reason);
  a->set_rank(topology_.rank);
  a->set_host(config_.host);
  SPDLOG_ERROR("reporting this rank's failure to the coordinator: {}", a->reason());
  bool sent = submitter_->exclusive([&] { return stream_->write(message); });
  // The stream is gone (the coordinator may still be there): say it once more, briefly, since
  // the process is about to exit.
  constexpr std::chrono::seconds kUnaryAbortDeadline{2};
  if (!sent) sent = client_->abort(*a, kUnaryAbortDeadline).is_ok();
  return sent;
}

void Runtime::release_peers_of_skipped_plans() {
  bool skipped = false;
  {
    // The loop has stopped: the plans it never started are the inbox's. Only those this rank
    // takes part in keep peers waiting (another process set's plans only pass it by, and so
    // does an error response, such as the one for a peer's call made after this rank left:
    // tearing down then would fail peers still finishing a collective this rank completed).
    std::lock_guard<std::mutex> lock(state_.mutex);
    skipped = state_.skipped_plan;
    for (const v1::CoordinatorMessage& message : state_.inbox)
      if (!skipped && message.kind_case() == v1::CoordinatorMessage::kPlan)
        skipped = process_sets_->takes_part_in(message.plan());
  }
  if (!skipped) return;
  // The coordinator planned a collective with this rank's cancelled op: the peers run it and
  // would wait for this rank until their op timeout. Tear the data plane down so they fail now.
  tear_down("rank " + std::to_string(topology_.rank) +
            " shut down before running a collective the coordinator had already planned with it "
            "(shutdown() cancelled it); wait for every collective before shutdown()");
}

}  // namespace hvrun::detail
