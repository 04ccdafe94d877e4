#include "worker_lib/runtime/runtime_builder.h"

#include "common/logging.h"
#include "worker_lib/backends/nccl/host_plane/host_device_plane.h"
#include "worker_lib/runtime/cpu_backend_factory.h"
#include "worker_lib/telemetry/gpu_sampler.h"

namespace hvrun::detail {

Status RuntimeBuilder::build() {
  HVRUN_RETURN_IF_ERROR(register_rank());
  HVRUN_RETURN_IF_ERROR(build_data_planes());
  HVRUN_RETURN_IF_ERROR(open_stream());
  return build_negotiation();
}

Status RuntimeBuilder::register_rank() {
  RuntimeParts& p = parts_;
  p.client = std::make_unique<CoordinatorClient>(p.config.coordinator_address, p.config.secret);
  HVRUN_ASSIGN_OR_RETURN(registered_, register_worker(p.config, *p.client));
  p.topology = registered_.topology;
  p.job_id = registered_.response.job_id();
  p.rank_hosts = registered_.hosts;
  logging::set_rank(p.topology.rank);
  SPDLOG_DEBUG("registered as rank {} of {} (job {})", p.topology.rank, p.topology.size, p.job_id);
  return Status::ok();
}

Status RuntimeBuilder::build_data_planes() {
  RuntimeParts& p = parts_;
  // Shared memory within a host, Gloo across hosts (see cpu_backend_factory.h).
  HVRUN_ASSIGN_OR_RETURN(CpuDataPlane plane, make_cpu_backend_for_job(p.config, registered_, *p.client));
  p.backend = std::move(plane.backend);
  plane_rounds_ = plane.rounds;
  WorkState& state = p.state;
  const auto explain_failure = [&state](Status failed) {
    return state.explain_failure(std::move(failed));
  };
  p.executor = std::make_unique<PlanExecutor>(*p.backend, p.topology.rank, p.topology.size);
  p.executor->set_failure_explainer(explain_failure);
  // CUDA tensors: NCCL, set up by the first CUDA response (backends/nccl/gpu_executor.h).
  auto gpu = std::make_unique<GpuExecutor>(GpuJob{.rank = p.topology.rank,
                                                  .size = p.topology.size,
                                                  .local_rank = p.topology.local_rank,
                                                  .host = p.config.host,
                                                  .op_timeout = p.config.op_timeout,
                                                  .setup_timeout = p.config.start_timeout,
                                                  .store = p.client.get(),
                                                  .allocator = p.config.device_allocator,
                                                  .plane_factory = cuda::device_plane_factory(p.config.device_plane),
                                                  .elastic = p.config.elastic});
  p.gpu = gpu.get();
  p.executor->set_gpu_executor(std::move(gpu));
  ProcessSetPlanes::Job set_job{.rank = p.topology.rank,
                                .size = p.topology.size,
                                .local_rank = p.topology.local_rank,
                                .hosts = registered_.hosts,
                                .job_id = p.job_id,
                                .config = &p.config,
                                .store = p.client.get(),
                                .explain_failure = explain_failure,
                                .observer = nullptr};
  // A coordinator that gives no placement leaves it unknown: a host per rank, so that sets use
  // Gloo, as the job does then.
  if (set_job.hosts.empty()) {
    for (int r = 0; r < p.topology.size; ++r)
      set_job.hosts.push_back("unknown-host-" + std::to_string(r));
    set_job.gloo_only = true;
  }
  build_telemetry(set_job);
  p.process_sets = std::make_unique<ProcessSetPlanes>(std::move(set_job));
  return Status::ok();
}

std::string RuntimeBuilder::backend_short_name() const {
  // "hierarchical(shm+gloo)" -> "hierarchical".
  std::string name = parts_.topology.size == 1 ? "local" : parts_.backend->name();
  return name.substr(0, name.find('('));
}

void RuntimeBuilder::build_telemetry(ProcessSetPlanes::Job& set_job) {
  RuntimeParts& p = parts_;
  const std::string backend_name = backend_short_name();
  p.telemetry = std::make_unique<telemetry::WorkerTelemetry>(backend_name);
  p.executor->set_phase_observer(p.telemetry.get(), backend_name);
  if (p.config.telemetry.flight_recorder_size > 0) {
    p.recorder = std::make_unique<FlightRecorder>(p.config.telemetry.flight_recorder_size,
                                                  backend_name);
    p.executor->set_flight_recorder(p.recorder.get());
    set_job.recorder = p.recorder.get();
  }
  set_job.observer = p.telemetry.get();
  // Record from the first collective (TimelineState follows Welcome, which may be after the
  // trainer's first submissions).
  if (registered_.timeline_from_start) p.telemetry->set_recording(true);
  // Created before the reader thread (which may ask it for a report), started with the other
  // threads (RuntimeLifecycle::start), once the stream is open.
  constexpr std::chrono::milliseconds kReportInterval{500};  // when something changed
  p.reporter = std::make_unique<telemetry::ReportSender>(
      *p.telemetry, [&p](const v1::WorkerMessage& m) { return p.stream->write(m); },
      kReportInterval,
      [visible = p.config.telemetry.cuda_visible_devices] { return telemetry::sample_gpus(visible); });
}

RoundAgreement* RuntimeBuilder::rounds() const {
  return parts_.topology.size < 2 ? nullptr : plane_rounds_;
}

Status RuntimeBuilder::open_stream() {
  RuntimeParts& p = parts_;
  // Refusals go to the agreement even with the fast path off here: a peer whose setting
  // differs then falls back at once instead of at its deadline.
  p.lane.set_rounds(rounds());
  p.stream = p.client->open_stream();
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(p.topology.rank);
  if (p.stream->write(hello)) return Status::ok();
  Status finished = p.stream->finish();
  return unavailable("rank " + std::to_string(p.topology.rank) +
                     ": could not open the negotiation stream to the coordinator at " +
                     p.config.coordinator_address + ": " + finished.to_string());
}

Status RuntimeBuilder::build_negotiation() {
  RuntimeParts& p = parts_;
  const int rank = p.topology.rank;
  p.submitter = std::make_unique<Submitter>(p.state, p.lane, *p.stream, *p.telemetry, rank);
  p.submitter->set_flight_recorder(p.recorder.get());
  p.rank_state = std::make_unique<RuntimeRankState>(p.state, *p.submitter, *p.telemetry);
  p.fast_path = std::make_unique<FastPath>(
      FastPath::Context{*p.rank_state, p.lane, p.executor->cpu(), *p.telemetry,
                        p.topology.size, p.config.op_timeout, p.config.fast_path, p.recorder.get()},
      rounds());
  p.cached_rounds = std::make_unique<CachedRounds>(
      CachedRounds::Context{*p.rank_state, p.lane, *p.executor, *p.telemetry,
                            *p.fast_path, p.topology.size, registered_.fusion_threshold_bytes},
      rounds());
  p.plan_runner = std::make_unique<PlanRunner>(
      PlanRunner::Context{p.state, p.lane, *p.submitter, *p.cached_rounds, *p.executor,
                          *p.process_sets, *p.telemetry, *p.stream, *p.client, rank, p.config.host,
                          p.config.coordinator_address, registered_.cycle_time});
  if (p.plan_runner->gathering())
    HVRUN_RETURN_IF_ERROR(p.submitter->let_batches_gather(registered_.cycle_time));
  p.heartbeat = std::make_unique<Heartbeat>(
      *p.stream,
      registered_.heartbeat_timeout ? Heartbeat::interval_for(*registered_.heartbeat_timeout)
                                    : std::chrono::milliseconds(1000),
      p.plan_runner->finished_plan_seq());
  p.autopsy = std::make_unique<AutopsyResponder>(AutopsyResponder::Context{
      .recorder = p.recorder.get(),
      .send = [&p](const v1::WorkerMessage& m) { return p.stream->write(m); },
      .rank = rank,
      .host = p.config.host});
  RuntimeLifecycle& lifecycle = lifecycle_;
  p.reader = std::make_unique<StreamReader>(StreamReader::Context{
      .state = p.state,
      .stream = *p.stream,
      .telemetry = *p.telemetry,
      .reporter = *p.reporter,
      .tear_down =
          [&lifecycle](const std::string& reason, bool membership_changed) {
            lifecycle.tear_down(reason, membership_changed ? RuntimeLifecycle::TearDown::kMembershipChanged
                                                           : RuntimeLifecycle::TearDown::kAbort);
          },
      .on_end = [&p] { p.heartbeat->stop(); },
      .stopping = [&lifecycle] { return lifecycle.stopping(); },
      .rank = rank,
      .coordinator_address = p.config.coordinator_address,
      .on_autopsy = [&p](const v1::AutopsyRequest& request) { p.autopsy->request(request); }});
  return Status::ok();
}

}  // namespace hvrun::detail
