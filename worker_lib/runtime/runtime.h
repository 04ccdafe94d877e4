// The worker runtime: registration, the data-plane backend and the background thread.
//
// Negotiation, step by step (the protocol contract lives in proto/hvrun.proto and the brief):
//  1. init: Register (blocks until every rank registered), connect the backend through the
//     coordinator's key-value store, open the Negotiate stream and send Hello.
//  2. API threads call submit(): the op enters the in-flight table (by name) and the outbox.
//  3. The background thread (woken by submit) sends the outbox as one RequestBatch; a thread
//     that then blocks on a handle (Worker::wait, so every blocking collective) sends it
//     itself if the background thread has not yet (send_pending: issue 11's latency). Full
//     metadata the first time,
//     only the cache id once the coordinator assigned one and the metadata is unchanged.
//  4. A reader thread only blocks in the stream's Read() (gRPC's synchronous API cannot wait for
//     a message and a wake-up at once) and hands messages to the background thread. A JobAbort
//     tears the data plane down at once (Backend::abort), so a collective the background
//     thread is blocked in fails promptly with the abort's reason; plans received before it
//     still run in order (barriers complete, collectives fail), then every other handle fails.
//     The stream ending while the worker did not shut down (coordinator gone) fails every
//     handle at once, naming the coordinator's address, and tears the data plane down too.
//  4b. A heartbeat thread sends Heartbeat{last finished plan} every heartbeat interval (a tenth
//     of the coordinator's heartbeat timeout, at most 1 s), even while the background thread
//     is inside a long collective; the coordinator aborts the job when a rank falls silent.
//  5. The background thread executes every Plan's responses in order (PlanExecutor) and
//     completes handles; JobAbort fails everything with kAborted; a lost stream with kUnavailable.
//  6. shutdown: fail what is pending with kCancelled, send Goodbye, close the stream (bounded).
//
//  7. The fast path (runtime_fast_path.cc, issue 11's latency): a blocking allreduce of a
//     tensor the coordinator already negotiated (cached, metadata unchanged) on a single-host
//     shared-memory job runs on the caller's thread when every rank is idle and calls the same
//     one: the ranks agree through the segment's round board (backends/shm/round_board.h) and
//     reduce there, with no message to the coordinator. Rounds are numbered by events_ (plans
//     executed + fast collectives run), the same on every idle rank; executing under
//     exec_mutex_ puts a fast collective between the same two plans on every rank. Anything
//     else (a rank busy, another tensor, a submission, a deadline) fails the round on every
//     rank alike and the call goes through the coordinator.
//
// Threads: submit/abort/shutdown/send_pending from any thread; waiting threads and the
// background thread write RequestBatches under send_mutex_ (which guards the request cache);
// the executor runs under exec_mutex_ (the background thread's plans, an API thread's fast
// collective). Shared state is guarded by mutex_. Lock order: exec_mutex_, send_mutex_, mutex_.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hvrun/hvrun.h"
#include "worker_lib/backend.h"
#include "worker_lib/runtime/coordinator_client.h"
#include "worker_lib/runtime/live_workers.h"
#include "worker_lib/runtime/pending_op.h"
#include "worker_lib/runtime/plan_executor.h"
#include "worker_lib/telemetry/report_sender.h"
#include "worker_lib/telemetry/worker_telemetry.h"

namespace hvrun::detail {

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> start(const Config& config);
  ~Runtime();

  // Takes ownership of `op`; returns its handle (already failed when the runtime is not
  // running or the name is in flight).
  Handle submit(std::shared_ptr<PendingOp> op);
  // All or nothing: every op is queued (in one batch), or every handle fails.
  std::vector<Handle> submit_group(std::vector<std::shared_ptr<PendingOp>> ops);
  // `failure`: this rank leaves because of an error of its own; it is reported to the
  // coordinator (which aborts the job naming this rank) instead of Goodbye (Worker::
  // shutdown_with_failure).
  Status shutdown(const std::optional<std::string>& failure = std::nullopt);
  void abort(const std::string& reason);
  // Latency (issue 11): the calling thread is about to block on a handle, so it writes what
  // the outbox still holds itself instead of waiting for the background thread to wake up
  // and do it (a thread hop of tens of us on a busy host). Async submissions keep waking the
  // background thread, which batches a burst into one write. Any thread.
  void send_pending();
  // A blocking allreduce the fast path may run (see 7. above): CPU tensors of `dtype` and
  // `shape`, already checked by the caller.
  struct FastAllreduce {
    const std::string& name;
    const void* input;
    void* output;
    DataType dtype;
    const std::vector<int64_t>& shape;
    const AllreduceOptions& options;
  };
  // Runs `call` when every rank agrees and returns its status; nullopt when it did not run
  // (submit it as usual). Any thread.
  std::optional<Status> try_fast_allreduce(const FastAllreduce& call);

  const Topology& topology() const { return topology_; }
  const std::string& job_id() const { return job_id_; }
  const Config& config() const { return config_; }
  // Any thread: allocator for library-allocated CUDA outputs (see hvrun::DeviceAllocator).
  void set_device_allocator(DeviceAllocator allocator) {
    executor_->set_device_allocator(std::move(allocator));
  }
  // Telemetry (issue 13, worker_lib/telemetry/): the trainer's step counter, and the job's
  // timeline started / stopped at run time (the coordinator writes the file). Any thread.
  void mark_step() {
    if (telemetry_) telemetry_->mark_step();
  }
  Status start_timeline(const std::string& path);
  Status stop_timeline();
  // Per-process counters, the same on every rank by the callers' contract.
  uint64_t next_barrier_id();
  uint64_t next_group_id();

 private:
  explicit Runtime(const Config& config);
  Status connect();
  void loop();
  void read_stream();
  void heartbeat();
  // A failed collective's status, or the job's abort reason when one arrives shortly after.
  Status explain_failure(Status failed);
  // Reader thread, once the stream ended with neither Goodbye nor JobAbort: why, in words that
  // say who ended it (from the stream's final status).
  Status stream_lost_status();
  // shutdown(failure): sends the failure as an AbortRequest; false when the job had already
  // failed or the coordinator could not be told.
  bool report_failure(const std::string& reason);
  // send_mutex_ held.
  void send_requests(std::deque<std::shared_ptr<PendingOp>>& batch);
  // Any thread: sends what the outbox holds.
  void flush_outbox();
  void handle_message(const v1::CoordinatorMessage& message);
  void execute_plan(const v1::Plan& plan);
  void start_telemetry();  // after the stream is open (connect)
  Status send_timeline_control(const std::string& filename);
  void remember_cache_ids(const v1::Response& response,
                          const std::vector<std::shared_ptr<PendingOp>>& entries);
  // Fails every in-flight op with `status` and makes later submissions fail with it too.
  // Any thread.
  void terminate(Status status);
  static Status abort_status(const v1::JobAbort& abort);
  // shutdown(): when a plan went unexecuted (its ops were cancelled), tears the data plane down
  // so peers blocked in that collective fail at once instead of at their op timeout.
  void release_peers_of_skipped_plans();

  Config config_;
  std::unique_ptr<LiveWorkerClaim> claim_;  // from start() to the end of shutdown()
  Topology topology_;
  std::string job_id_;
  std::unique_ptr<CoordinatorClient> client_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<NegotiationStream> stream_;
  std::unique_ptr<PlanExecutor> executor_;
  // Telemetry: counters and timeline events (set in connect), and the thread that reports them
  // on stream_ (declared after both, so it stops first).
  std::unique_ptr<telemetry::WorkerTelemetry> telemetry_;
  std::unique_ptr<telemetry::ReportSender> reporter_;

  std::mutex mutex_;
  std::condition_variable wake_;
  // The heartbeat thread's own: wake_ is notified on every submission and message, and waking
  // the heartbeat thread each time costs the busy path a context switch (issue 11).
  std::condition_variable heartbeat_wake_;
  std::unordered_map<std::string, std::shared_ptr<PendingOp>> in_flight_;  // mutex_
  std::deque<std::shared_ptr<PendingOp>> outbox_;                            // mutex_
  std::deque<v1::CoordinatorMessage> inbox_;                                 // mutex_
  std::optional<Status> terminal_;        // mutex_: set once the runtime stops taking work
  std::optional<std::string> abort_reason_;  // mutex_: abort() asked, not yet sent
  bool stop_requested_ = false;           // mutex_
  bool stream_ended_ = false;             // mutex_
  bool shut_down_ = false;                // mutex_
  bool heartbeat_stop_ = false;           // mutex_
  uint64_t barrier_counter_ = 0;          // mutex_
  uint64_t group_counter_ = 0;            // mutex_
  uint64_t plans_received_ = 0;           // mutex_: by the reader thread
  uint64_t plans_started_ = 0;            // mutex_: by the background thread
  bool skipped_plan_ = false;             // mutex_: a plan arrived after terminal_ (not run)

  // What the fast path needs of a cached allreduce: the response to execute, rebuilt from the
  // coordinator's, and a hash of the metadata for the ranks to compare.
  struct FastEntry {
    std::shared_ptr<const v1::Response> response;
    uint64_t signature_hash = 0;
  };
  struct CacheEntry {
    uint32_t id;
    std::string signature;
    std::shared_ptr<const PendingOp> metadata;  // the op as cached (its fields, no buffers)
    FastEntry fast;                             // allreduce on CPU only
  };
  // Fast path helpers (runtime_fast_path.cc).
  void enable_fast_path();  // in connect(), once the backend exists
  // exec_mutex_ held: the cache entry of `call` when it may run fast (null otherwise).
  const CacheEntry* fast_entry(const FastAllreduce& call) const;
  bool idle_for_fast_path();
  // This rank will not take part in the round it would join now (it sent the coordinator
  // something, or shuts down): the others need not wait for it.
  void refuse_fast_round();
  // After an event (a plan, a fast collective): refuses the new round when this rank still
  // waits for something (a join, an op another thread submitted).
  void refuse_if_busy();
  CacheEntry make_cache_entry(uint32_t id, const PendingOp& op, std::string signature) const;
  // Lock order: send_mutex_, then mutex_. Serialises RequestBatch writers (submitting threads,
  // the background thread) and guards cache_.
  std::mutex send_mutex_;
  // Written under exec_mutex_ and send_mutex_ (remember_cache_ids, from execute_plan), so
  // holding either one is enough to read it.
  std::unordered_map<std::string, CacheEntry> cache_;

  // The executor's lock (see 7. above): the background thread holds it for each plan, an API
  // thread for a fast collective.
  std::mutex exec_mutex_;
  // Plans executed plus fast collectives run (written under exec_mutex_): the fast path's round.
  std::atomic<uint64_t> events_{0};
  shm::RoundBoard* board_ = nullptr;  // set once in connect() on a single-host shm job
  bool fast_enabled_ = false;         // set once in connect(): board_ and --fast-path
  std::chrono::nanoseconds fast_wait_{std::chrono::milliseconds(50)};
  std::vector<const void*> fast_sources_;  // exec_mutex_: the round's payloads

  // Background thread only.
  uint64_t last_plan_seq_ = 0;

  std::atomic<uint64_t> finished_plan_seq_{0};  // background thread writes; heartbeat reads
  std::chrono::milliseconds heartbeat_interval_{1000};
  std::thread heartbeat_;

  std::thread reader_;
  std::thread loop_;
};

}  // namespace hvrun::detail
