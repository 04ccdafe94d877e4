#include "worker_lib/runtime/runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "common/logging.h"
#include "worker_lib/backends/shm/round_board.h"
#include "worker_lib/runtime/cpu_backend_factory.h"
#include "worker_lib/runtime/live_workers.h"
#include "worker_lib/telemetry/gpu_sampler.h"

namespace hvrun::detail {
namespace {

constexpr int kProtocolVersion = 1;
constexpr std::chrono::seconds kRegisterSlack{10};
constexpr std::chrono::seconds kGoodbyeTimeout{5};
constexpr std::chrono::seconds kAbortReasonWait{3};

std::string local_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// Whether this rank's handles of a response completed OK (timeline "done" status).
bool succeeded(const std::vector<std::shared_ptr<PendingOp>>& entries) {
  for (const auto& e : entries) {
    if (!e) continue;
    std::lock_guard<std::mutex> lock(e->handle->mutex);
    if (!e->handle->status.is_ok()) return false;
  }
  return true;
}

}  // namespace

Runtime::Runtime(const Config& config) : config_(config) {
  if (config_.host.empty()) config_.host = local_host_name();
}

Runtime::~Runtime() { (void)shutdown(); }

Result<std::unique_ptr<Runtime>> Runtime::start(const Config& config) {
  if (config.coordinator_address.empty())
    return invalid_argument("hvrun worker: no coordinator address (HVRUN_COORDINATOR_ADDR); "
                            "start the trainer with hvrun, or fill Config::coordinator_address");
  HVRUN_RETURN_IF_ERROR(logging::init("worker", config.log_level));
  HVRUN_ASSIGN_OR_RETURN(auto claim, LiveWorkerClaim::claim(config.coordinator_address));
  std::unique_ptr<Runtime> runtime(new Runtime(config));
  runtime->claim_ = std::move(claim);
  HVRUN_RETURN_IF_ERROR(runtime->connect());
  runtime->claim_->set_identity(runtime->topology_.rank, runtime->job_id_);
  return runtime;
}

Status Runtime::connect() {
  client_ = std::make_unique<CoordinatorClient>(config_.coordinator_address, config_.secret);
  v1::RegisterRequest request;
  request.set_protocol_version(kProtocolVersion);
  v1::WorkerInfo* info = request.mutable_worker();
  info->set_host(config_.host);
  info->set_local_rank(config_.local_rank);
  info->set_pid(static_cast<int32_t>(getpid()));
  info->set_device_kind(v1::DEVICE_KIND_CPU);
  info->set_requested_rank(config_.requested_rank);
  info->set_hvrun_version(hvrun::version());
  auto registered = client_->register_worker(
      request, config_.start_timeout + std::chrono::duration_cast<std::chrono::milliseconds>(kRegisterSlack));
  if (!registered.is_ok()) return registered.status();
  if (registered->protocol_version() != 0 && registered->protocol_version() != kProtocolVersion)
    return failed_precondition("coordinator speaks protocol version " +
                               std::to_string(registered->protocol_version()) +
                               ", this worker library " + std::to_string(kProtocolVersion) +
                               ": use the same hvrun version everywhere");
  const v1::Topology& t = registered->topology();
  topology_ = Topology{t.rank(), t.size(), t.local_rank(), t.local_size(), t.cross_rank(),
                       t.cross_size()};
  job_id_ = registered->job_id();
  // Heartbeat often enough that the coordinator's timeout (its setting, which every rank gets
  // at registration) never fires on a live worker: a tenth of it, at most every second.
  if (auto it = registered->settings().find("heartbeat_timeout_s"); it != registered->settings().end()) {
    char* end = nullptr;
    double timeout_s = std::strtod(it->second.c_str(), &end);
    if (end != it->second.c_str() && timeout_s > 0)
      heartbeat_interval_ = std::clamp(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 100.0)),
                                       std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
  }
  logging::set_rank(topology_.rank);
  SPDLOG_DEBUG("registered as rank {} of {} (job {})", topology_.rank, topology_.size, job_id_);

  // Shared memory within a host, Gloo across hosts (see cpu_backend_factory.h).
  auto backend = make_cpu_backend_for_job(config_, *registered, *client_);
  if (!backend.is_ok()) return backend.status();
  backend_ = std::move(backend).value();
  executor_ = std::make_unique<PlanExecutor>(*backend_, topology_.rank, topology_.size);
  executor_->set_failure_explainer([this](Status failed) { return explain_failure(std::move(failed)); });
  // Telemetry counts CPU responses under the backend's short name ("hierarchical(shm+gloo)"
  // -> "hierarchical"); a one-rank job moves nothing ("local").
  {
    std::string backend_name = topology_.size == 1 ? "local" : backend_->name();
    backend_name = backend_name.substr(0, backend_name.find('('));
    telemetry_ = std::make_unique<telemetry::WorkerTelemetry>(backend_name);
    executor_->set_phase_observer(telemetry_.get(), backend_name);
    // --timeline-filename: record from the first collective (TimelineState follows Welcome,
    // which may be after the trainer's first submissions).
    if (auto it = registered->settings().find("timeline_filename");
        it != registered->settings().end() && !it->second.empty())
      telemetry_->set_recording(true);
    // Created before the reader thread (which may ask it for a report), started once the
    // stream is open (start_telemetry).
    constexpr std::chrono::milliseconds kReportInterval{500};  // when something changed
    reporter_ = std::make_unique<telemetry::ReportSender>(
        *telemetry_, [this](const v1::WorkerMessage& m) { return stream_->write(m); },
        kReportInterval, [] { return telemetry::sample_gpus(); });
  }
  enable_fast_path();  // before the threads that read board_ start
  // CUDA tensors: NCCL, set up by the first CUDA response (backends/nccl/gpu_executor.h).
  executor_->enable_gpu(GpuJob{.rank = topology_.rank,
                               .size = topology_.size,
                               .local_rank = topology_.local_rank,
                               .host = config_.host,
                               .op_timeout = config_.op_timeout,
                               .setup_timeout = config_.start_timeout,
                               .store = client_.get(),
                               .allocator = config_.device_allocator});

  stream_ = client_->open_stream();
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_rank(topology_.rank);
  if (!stream_->write(hello)) {
    Status finished = stream_->finish();
    return unavailable("rank " + std::to_string(topology_.rank) +
                       ": could not open the negotiation stream to the coordinator at " +
                       config_.coordinator_address + ": " + finished.to_string());
  }
  reader_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvrun-reader");
    read_stream();
  });
  loop_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvrun-loop");
    loop();
  });
  heartbeat_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvrun-heartbeat");
    heartbeat();
  });
  start_telemetry();
  return Status::ok();
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
    std::lock_guard<std::mutex> lock(mutex_);
    if (terminal_) return *terminal_;
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

uint64_t Runtime::next_barrier_id() {
  std::lock_guard<std::mutex> lock(mutex_);
  return barrier_counter_++;
}

uint64_t Runtime::next_group_id() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++group_counter_;
}

Handle Runtime::submit(std::shared_ptr<PendingOp> op) {
  Handle handle(op->handle);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (terminal_) {
      op->handle->complete(*terminal_);
      return handle;
    }
    auto [it, inserted] = in_flight_.emplace(op->name(), op);
    if (!inserted) {
      op->handle->complete(already_exists(
          "rank " + std::to_string(topology_.rank) + ": tensor '" + op->name() +
          "' submitted again while the previous one with that name is still in flight; wait "
          "for it first or use another name"));
      return handle;
    }
    if (telemetry_) telemetry_->on_submitted(op->name(), op->op);
    outbox_.push_back(std::move(op));
  }
  refuse_fast_round();
  wake_.notify_all();
  return handle;
}

std::vector<Handle> Runtime::submit_group(std::vector<std::shared_ptr<PendingOp>> ops) {
  std::vector<Handle> handles;
  for (const auto& op : ops) handles.emplace_back(op->handle);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<Status> refusal = terminal_;
    for (size_t i = 0; i < ops.size() && !refusal; ++i) {
      bool repeated = in_flight_.count(ops[i]->name()) > 0;
      for (size_t j = 0; j < i && !repeated; ++j) repeated = ops[j]->name() == ops[i]->name();
      if (repeated)
        refusal = already_exists("grouped allreduce: tensor '" + ops[i]->name() +
                                 "' is in flight already or named twice in the group");
    }
    if (refusal) {
      for (const auto& op : ops) op->handle->complete(*refusal);
      return handles;
    }
    for (auto& op : ops) {
      in_flight_.emplace(op->name(), op);
      if (telemetry_) telemetry_->on_submitted(op->name(), op->op);
      outbox_.push_back(std::move(op));
    }
  }
  refuse_fast_round();
  wake_.notify_all();
  return handles;
}

void Runtime::send_pending() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (outbox_.empty()) return;  // the background thread sent it already (or is sending it)
  }
  flush_outbox();
}

void Runtime::flush_outbox() {
  // send_mutex_ keeps one sender at a time and guards cache_. Taking the outbox and writing it
  // under the same send_mutex_ keeps batches in submission order: a join must never reach the
  // coordinator before an op this rank submitted earlier.
  std::lock_guard<std::mutex> send_lock(send_mutex_);
  std::deque<std::shared_ptr<PendingOp>> outbox;
  bool ended = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outbox.swap(outbox_);
    ended = stream_ended_;
  }
  if (!outbox.empty() && !ended) send_requests(outbox);
}

void Runtime::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (terminal_ || abort_reason_) return;
    abort_reason_ = reason;
  }
  wake_.notify_all();
  // The background thread may be inside a collective (it sends the AbortRequest only between
  // operations): tear this rank's data planes down now so that collective fails at once.
  const std::string local = "job aborted: " + reason + " (rank " + std::to_string(topology_.rank) +
                            ")";
  if (backend_) backend_->abort(local);
  if (executor_) executor_->abort_gpu(local);
}

void Runtime::terminate(Status status) {
  std::unordered_map<std::string, std::shared_ptr<PendingOp>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (terminal_) return;
    terminal_ = status;
    failed.swap(in_flight_);
    outbox_.clear();
  }
  for (auto& [name, op] : failed) op->handle->complete(status);
}

Status Runtime::shutdown(const std::optional<std::string>& failure) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return Status::ok();
    shut_down_ = true;
  }
  if (!loop_.joinable()) {  // never started
    claim_.reset();
    return Status::ok();
  }
  // Before anything else: the peers must learn this rank's failure before its data plane
  // goes away under them, so that the job's abort names the cause, not a consequence.
  const bool reported_failure = failure && report_failure(*failure);
  if (board_) board_->leave();  // peers in a fast round, now or later, take the slow path
  terminate(cancelled("hvrun worker rank " + std::to_string(topology_.rank) +
                      " shut down before this collective completed"));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    terminal_ = failed_precondition("hvrun worker rank " + std::to_string(topology_.rank) +
                                    " was shut down; no more collectives can be submitted");
    stop_requested_ = true;
  }
  wake_.notify_all();
  loop_.join();
  release_peers_of_skipped_plans();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    heartbeat_stop_ = true;
  }
  heartbeat_wake_.notify_all();
  heartbeat_.join();

  // The last telemetry report (final counters, the timeline's tail) goes before Goodbye.
  if (reporter_) reporter_->flush_and_stop();
  if (telemetry_) telemetry::unregister_for_steps(telemetry_.get());

  // The loop and the heartbeat have stopped, but an API thread may still be inside
  // flush_outbox() with a batch it took: send_mutex_ lets it finish before Goodbye, and
  // write_last() refuses anything written after.
  {
    std::lock_guard<std::mutex> send_lock(send_mutex_);
    v1::WorkerMessage goodbye;
    goodbye.mutable_goodbye();
    // A rank that reported its failure leaves without Goodbye: it did not finish cleanly.
    if (reported_failure ? !stream_->close_writes() : !stream_->write_last(goodbye))
      SPDLOG_DEBUG("Goodbye not delivered (stream already closed)");
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!wake_.wait_for(lock, kGoodbyeTimeout, [&] { return stream_ended_; })) {
      SPDLOG_WARN("coordinator did not close the stream within {} s after Goodbye; cancelling",
                  kGoodbyeTimeout.count());
      stream_->cancel();
    }
  }
  reader_.join();
  release_peers_of_skipped_plans();  // plans that arrived after the loop stopped
  (void)stream_->finish();  // cancelled or aborted streams end with an error: nothing to do
  claim_.reset();  // this process may init() again
  return Status::ok();
}

bool Runtime::report_failure(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The job already failed (this rank's error may well be its consequence): the coordinator
    // knows the cause and another report would only compete with it.
    if (terminal_ || abort_reason_) return false;
  }
  v1::WorkerMessage message;
  v1::AbortRequest* a = message.mutable_abort();
  a->set_reason("rank " + std::to_string(topology_.rank) + " on host " + config_.host + " (pid " +
                std::to_string(getpid()) + ") failed: " + reason);
  a->set_rank(topology_.rank);
  a->set_host(config_.host);
  SPDLOG_ERROR("reporting this rank's failure to the coordinator: {}", a->reason());
  bool sent = false;
  {
    std::lock_guard<std::mutex> send_lock(send_mutex_);
    sent = stream_->write(message);
  }
  // The stream is gone (the coordinator may still be there): say it once more, briefly, since
  // the process is about to exit.
  constexpr std::chrono::seconds kUnaryAbortDeadline{2};
  if (!sent) sent = client_->abort(*a, kUnaryAbortDeadline).is_ok();
  return sent;
}

void Runtime::release_peers_of_skipped_plans() {
  bool skipped = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    skipped = skipped_plan_ || plans_received_ != plans_started_;
  }
  if (!skipped) return;
  // The coordinator planned a collective with this rank's cancelled op: the peers run it and
  // would wait for this rank until their op timeout. Tear the data plane down so they fail now.
  const std::string reason = "rank " + std::to_string(topology_.rank) +
                             " shut down before running a collective the coordinator had "
                             "already planned with it (shutdown() cancelled it); wait for every "
                             "collective before shutdown()";
  backend_->abort(reason);
  executor_->abort_gpu(reason);
}

Status Runtime::abort_status(const v1::JobAbort& a) {
  std::string rank = "rank " + std::to_string(a.rank());
  bool named = a.rank() < 0 || a.reason().find(rank) != std::string::npos;
  std::string who = named ? "" : " (" + rank + (a.host().empty() ? "" : " on host " + a.host()) + ")";
  return aborted("job aborted: " + a.reason() + who);
}

void Runtime::read_stream() {
  v1::CoordinatorMessage message;
  bool job_aborted = false;  // the coordinator closes the stream after a JobAbort: no surprise
  while (stream_->read(&message)) {
    bool abort_now = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (message.kind_case() == v1::CoordinatorMessage::kPlan) {
        ++plans_received_;
        telemetry_->on_plan_received(message.plan().seq());
      } else if (message.kind_case() == v1::CoordinatorMessage::kTimeline) {
        telemetry_->set_recording(message.timeline().recording());
        // Stopped: the coordinator closes the file once every rank sent its last events.
        if (!message.timeline().recording() && reporter_) reporter_->request_report();
      }
      // Plans received before a JobAbort still run, in order (every rank got them): what needs
      // no data plane (barrier, join, error responses) completes, collectives fail on the
      // torn-down data plane with the abort's reason. When the background thread has started
      // every received plan, nothing is left to run: fail what waits right now.
      abort_now = message.kind_case() == v1::CoordinatorMessage::kAbort &&
                  plans_started_ == plans_received_;
      inbox_.push_back(message);
    }
    if (message.kind_case() == v1::CoordinatorMessage::kAbort) {
      job_aborted = true;
      Status status = abort_status(message.abort());
      if (abort_now) terminate(status);
      // Unblock a collective the background thread may be stuck in (a dead peer, a stopped
      // one) and make the remaining ones fail at once.
      backend_->abort(status.message());
      executor_->abort_gpu(status.message());
    }
    wake_.notify_all();
    message.Clear();
  }
  bool unexpected = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    unexpected = !shut_down_ && !job_aborted;
  }
  if (unexpected) {
    // Nothing can be negotiated any more. Failed before stream_ended_ is set, so that the
    // background thread's fallback cannot fail the handles with vaguer words first.
    Status status = stream_lost_status();
    SPDLOG_ERROR("{}", status.message());
    terminate(status);
    backend_->abort(status.message());
    executor_->abort_gpu(status.message());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stream_ended_ = true;
  }
  wake_.notify_all();
  heartbeat_wake_.notify_all();
}

Status Runtime::stream_lost_status() {
  const std::string who = "rank " + std::to_string(topology_.rank);
  const std::string where = "the coordinator at " + config_.coordinator_address;
  // How the stream ended says who ended it: a status the coordinator chose (it refused
  // something this rank sent), or one gRPC made because the connection broke.
  const Status why = stream_->finish();
  switch (why.code()) {
    case StatusCode::kOk:
    case StatusCode::kCancelled:
      return unavailable(who + ": " + where +
                         " ended the negotiation stream without a reason (no JobAbort); the "
                         "job cannot continue; see the coordinator's (hvrun's) log");
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return unavailable(who + ": lost the connection to " + where + " (" + why.message() +
                         "); the coordinator process may have exited or hung, or the network "
                         "to it failed; see hvrun's output for which");
    default:
      return Status(why.code(), who + ": " + where + " closed the negotiation stream: " +
                                    why.message());
  }
}

Status Runtime::explain_failure(Status failed) {
  // A collective fails when a peer dies; the coordinator learns it too and says who (its
  // JobAbort, which the reader turns into terminal_). Give that a moment to arrive.
  std::unique_lock<std::mutex> lock(mutex_);
  if (terminal_ && terminal_->code() == StatusCode::kAborted) {
    if (failed.code() == StatusCode::kAborted) return *terminal_;  // the teardown's own words
  } else if (failed.code() == StatusCode::kAborted) {
    return failed;  // torn down by a JobAbort this thread has yet to handle: carries its reason
  } else {
    wake_.wait_for(lock, kAbortReasonWait, [&] { return terminal_.has_value() || stream_ended_; });
    if (!terminal_ || terminal_->code() != StatusCode::kAborted) return failed;
  }
  return Status(StatusCode::kAborted, terminal_->message() + " (data plane: " + failed.message() + ")");
}

void Runtime::heartbeat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!heartbeat_wake_.wait_for(lock, heartbeat_interval_,
                                   [&] { return heartbeat_stop_ || stream_ended_; })) {
    lock.unlock();
    v1::WorkerMessage message;
    message.mutable_heartbeat()->set_last_plan_seq(finished_plan_seq_.load());
    const bool sent = stream_->write(message);
    lock.lock();
    if (!sent) break;  // the stream is closed; the reader reports why
  }
}

void Runtime::loop() {
  bool stream_done = false;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] {
      return !outbox_.empty() || !inbox_.empty() || stop_requested_ ||
             (stream_ended_ && !stream_done) || abort_reason_.has_value();
    });
    // The outbox is taken inside flush_outbox(), under send_mutex_: taking it here and writing
    // it later would let an API thread's flush write a later op (a join) before it.
    const bool outbox_waiting = !outbox_.empty();
    std::deque<v1::CoordinatorMessage> inbox;
    inbox.swap(inbox_);
    std::optional<std::string> abort_reason = std::exchange(abort_reason_, std::nullopt);
    bool stop = stop_requested_;
    bool ended = stream_ended_;
    lock.unlock();

    if (abort_reason && !ended) {
      v1::WorkerMessage message;
      v1::AbortRequest* a = message.mutable_abort();
      a->set_reason(*abort_reason);
      a->set_rank(topology_.rank);
      a->set_host(config_.host);
      if (!stream_->write(message)) (void)client_->abort(*a);
    }
    if (outbox_waiting) flush_outbox();
    for (const auto& message : inbox) handle_message(message);
    if (ended && !stream_done) {
      stream_done = true;
      // Normally terminal already (the reader's JobAbort or its account of the lost stream).
      terminate(unavailable("rank " + std::to_string(topology_.rank) +
                            ": the negotiation stream to the coordinator at " +
                            config_.coordinator_address + " ended"));
    }
    lock.lock();
    if (stop) break;
  }
}

void Runtime::send_requests(std::deque<std::shared_ptr<PendingOp>>& batch) {
  // The coordinator takes a batch's full requests first, then its cached ids: a full request
  // after a cached one (a join after a cached allreduce) starts a new batch, so the coordinator
  // sees this rank's submissions in their order.
  v1::WorkerMessage message;
  v1::RequestBatch* requests = message.mutable_requests();
  bool written = true;
  for (const auto& op : batch) {
    auto cached = cache_.find(op->name());
    if (op->group_id == 0 && cached != cache_.end() &&
        cached->second.signature == op->cache_signature()) {
      requests->add_cached_ids(cached->second.id);
    } else {
      if (requests->cached_ids_size() > 0) {
        written = stream_->write(message) && written;
        requests->Clear();
      }
      *requests->add_requests() = op->to_request();
    }
  }
  written = stream_->write(message) && written;
  if (!written)
    SPDLOG_DEBUG("request batch not sent: stream closed (the reader reports why)");
}

void Runtime::handle_message(const v1::CoordinatorMessage& message) {
  switch (message.kind_case()) {
    case v1::CoordinatorMessage::kWelcome:
      SPDLOG_DEBUG("coordinator welcomed us; first plan seq {}", message.welcome().first_plan_seq());
      break;
    case v1::CoordinatorMessage::kPlan:
      execute_plan(message.plan());
      break;
    case v1::CoordinatorMessage::kAbort: {
      Status status = abort_status(message.abort());
      SPDLOG_ERROR("{}", status.message());
      terminate(status);
      break;
    }
    case v1::CoordinatorMessage::kTimeline:
      break;  // the reader thread already switched recording (telemetry_)
    default:
      SPDLOG_WARN("ignoring an unknown message from the coordinator");
  }
}

void Runtime::execute_plan(const v1::Plan& plan) {
  // Every rank counts every plan it executes, in the same order: the fast path's rounds.
  std::lock_guard<std::mutex> exec_lock(exec_mutex_);
  // This rank moves past round `passed` without taking part in it: a peer waiting there (for a
  // blocking call this rank's API thread has yet to make) must not wait for it.
  const uint64_t passed = events_.fetch_add(1);
  if (board_) board_->refuse(static_cast<uint32_t>(passed));
  if (plan.seq() <= last_plan_seq_ && last_plan_seq_ != 0) {
    terminate(internal_error("coordinator sent plan seq " + std::to_string(plan.seq()) +
                             " after " + std::to_string(last_plan_seq_) +
                             " (sequence must increase; protocol error)"));
    return;
  }
  last_plan_seq_ = plan.seq();
  // Take every tensor of the plan out of the in-flight table at once: a JobAbort that arrives
  // while this plan runs fails only what no received plan covers (see read_stream), and tears
  // the data plane down, so the collective running now fails with the abort's reason.
  std::vector<std::vector<std::shared_ptr<PendingOp>>> plan_entries;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++plans_started_;
    if (terminal_) {  // arrived after the job ended: everything already failed
      skipped_plan_ = true;
      return;
    }
    for (const v1::Response& response : plan.responses()) {
      auto& entries = plan_entries.emplace_back();
      if (response.error_ranks_size() > 0) continue;  // someone's duplicate; see below
      for (const auto& t : response.tensors()) {
        auto it = in_flight_.find(t.name());
        if (it == in_flight_.end()) {
          entries.push_back(nullptr);
        } else {
          entries.push_back(std::move(it->second));
          in_flight_.erase(it);
        }
      }
    }
  }
  for (int i = 0; i < plan.responses_size(); ++i) {
    const v1::Response& response = plan.responses(i);
    const auto& entries = plan_entries[static_cast<size_t>(i)];
    if (response.error_ranks_size() > 0) {
      // A duplicate submission on those ranks; the first one stays in flight. This library
      // refuses duplicates before sending them, so there is nothing to fail here.
      SPDLOG_WARN("coordinator: {}", response.error());
      continue;
    }
    telemetry_->on_response_started(plan.seq(), response);
    if (!response.error().empty()) {
      for (const auto& e : entries)
        if (e) e->handle->complete(invalid_argument(response.error()));
      telemetry_->on_response_done(response, false);
      continue;
    }
    remember_cache_ids(response, entries);
    executor_->execute(response, entries);
    telemetry_->on_response_done(response, !telemetry_->recording() || succeeded(entries));
  }
  finished_plan_seq_.store(plan.seq());
  // Still waiting for something (a join, an op submitted meanwhile): this rank cannot take part
  // in the round the plan just moved it to, and peers should not wait for it there.
  refuse_if_busy();
}

void Runtime::remember_cache_ids(const v1::Response& response,
                                 const std::vector<std::shared_ptr<PendingOp>>& entries) {
  std::lock_guard<std::mutex> send_lock(send_mutex_);  // cache_: also read by send_pending()
  for (int i = 0; i < response.tensors_size(); ++i) {
    uint32_t id = response.tensors(i).cache_id();
    if (id == 0 || !entries[i]) continue;
    std::string signature = entries[i]->cache_signature();
    auto it = cache_.find(entries[i]->name());
    // Unchanged, unless the entry came from a grouped allreduce (same signature, no fast entry)
    // and this one could run fast.
    const PendingOp& op = *entries[i];
    const bool fast_kind = op.op == v1::COLLECTIVE_OP_ALLREDUCE && !op.device.is_cuda() &&
                           op.group_id == 0;
    if (it != cache_.end() && it->second.id == id && it->second.signature == signature &&
        (!fast_kind || it->second.fast.response))
      continue;
    cache_[entries[i]->name()] = make_cache_entry(id, *entries[i], std::move(signature));
  }
}

}  // namespace hvrun::detail
