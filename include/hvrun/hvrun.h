// hvrun's worker library: the C++ API that data-parallel trainers embed.
//
//   auto worker = hvrun::Worker::init();            // reads the environment hvrun sets
//   if (!worker.is_ok()) { ...worker.status()... }
//   hvrun::Handle h = (*worker)->allreduce_async("grad.w1", grad_view, {.op = ReduceOp::kAverage});
//   ... more work ...
//   if (auto s = h.wait(std::chrono::seconds(60)); !s.is_ok()) { ... }
//
// Contracts every caller must keep (as in Horovod):
//  * Every rank submits the same collectives under the same names with matching metadata
//    (dtype; shape for allreduce/broadcast/reducescatter; reduce op; root; scale factors).
//    Submission ORDER may differ between ranks: the coordinator orders execution. A mismatch
//    fails that tensor's handle on every rank with a message naming each rank and what it sent.
//  * A name may not be submitted again while an operation with that name is in flight on this
//    rank (the new handle fails with kAlreadyExists).
//  * A tensor name is non-empty UTF-8 text without NUL characters, the same rule in C, C++ and
//    Python (it travels as a protobuf string, and through the C API as a C string). Any other
//    byte string is refused at submission: the handle fails at once with kInvalidArgument
//    naming the rank and showing the name escaped (validate_tensor_name below); nothing is sent.
//  * Input and output buffers stay valid, and inputs unchanged, until the handle completes.
//  * barrier_async() and join_async() are called the same number of times, in the same order,
//    on every rank. After join_async() a rank submits nothing until the join completes; other
//    ranks' collectives proceed, this rank contributing neutral values (0 for Sum/Average,
//    the identity for Min/Max/Product; no rows to an allgather or alltoall) and Average
//    dividing by the ranks that contributed (by every rank with HVRUN_JOIN_AVERAGE=all). A
//    broadcast whose root joined fails on every rank. A joined rank does not see those
//    results: after join, broadcast state from join()'s result (the last rank to join took
//    part in every step).
//  * When the job aborts (a rank died or stopped heartbeating, a stall shutdown, abort()),
//    every pending and later handle fails with kAborted naming the cause, and the data plane is
//    torn down so a running collective fails at once; losing the connection to the coordinator
//    fails them with kUnavailable naming its address (and the connection error: the message
//    does not guess that the coordinator exited), a stream the coordinator ended without a
//    JobAbort with the status it gave.
//
// Threads: every method is thread-safe. A Worker runs these threads of its own (named, as
// `top -H` and stack dumps show them), all stopped by shutdown():
//   hvrun-loop       the background thread: sends submissions to the coordinator, executes its
//                    plans in order on the data plane, completes handles (and runs on_complete
//                    callbacks);
//   hvrun-reader     reads the coordinator's stream (plans, JobAbort) and hands it to the loop;
//   hvrun-heartbeat  tells the coordinator this rank is alive, even inside a long collective;
//   hvrun-batch      a timer: sends asynchronous submissions no caller waited for yet;
//   hvrun-telemetry  reports counters and timeline events to the coordinator;
//   hvrun-autopsy    answers the launcher's autopsy requests (see hvrun/autopsy.h);
//   hvrun-arbiter    only on the one rank that decides a multi-host job's shared-memory rounds;
//   hvrun-deadline   only once an op was submitted with a per-op timeout;
//   hvrun-gpu-done   only once a CUDA tensor was reduced: completes CUDA responses (and runs
//                    their on_complete callbacks) when the GPU finished them;
//   hvrun-watched    only under hvrun's death watch (HVRUN_DEATH_WATCH, elastic jobs): holds
//                    it, so that hvrun sees this process's death as it begins.
// Blocking allreduces on the fast path run on the caller's thread. The libraries linked in
// (gRPC, Gloo, NCCL) run threads of their own besides.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hvrun/status.h"
#include "hvrun/handle.h"
#include "hvrun/types.h"

namespace hvrun {

namespace detail {
class Runtime;
class OpDeadlines;
}

// The CPU data plane (--cpu-backend, --hierarchical-allreduce, --shm-chunk-kb; how a job picks
// one: worker_lib/runtime/cpu_backend_factory.h). Every rank of a job must use the same values.
struct CpuBackendConfig {
  std::string backend = "auto";       // auto | shm | gloo
  std::string hierarchical = "auto";  // auto | on | off
  size_t shm_chunk_bytes = size_t{1} << 20;
};

// The fast path and the cached rounds of shared-memory jobs (--fast-path, --fast-path-wait-ms).
struct FastPathConfig {
  bool enabled = true;
  // How long a rank waits for the others to call the same allreduce before it hands the call to
  // the coordinator (at most a quarter of Config::op_timeout is used).
  std::chrono::duration<double, std::milli> wait{50.0};
};

// What the worker's telemetry samples.
struct TelemetryConfig {
  // The GPUs this process sees, as CUDA_VISIBLE_DEVICES said when the Config was made; nullopt
  // when it is unset (every GPU).
  std::optional<std::string> cuda_visible_devices;
  // The flight recorder's ring (--flight-recorder-size): this rank's latest collectives, kept
  // for autopsies; 0 = off.
  size_t flight_recorder_size = 1024;
};

// How to reach the job. init() fills it from the environment hvrun sets (HVRUN_RANK,
// HVRUN_COORDINATOR_ADDR, HVRUN_SECRET, ...); other launchers may fill it themselves.
// init(config) reads nothing from the environment: a Config built by hand runs with its
// sub-structs' defaults unless its caller sets them (Config::from_environment() reads them
// all; the C API's hvrun_init_with_config takes cpu_backend, fast_path and telemetry from it).
struct Config {
  std::string coordinator_address;  // "127.0.0.1:40123" or "unix:/path"
  std::string secret;               // the job secret (never logged)
  // The job this worker was started for (HVRUN_JOB_ID): a coordinator running another job
  // refuses it by name. Empty: not checked (launchers that set no job id).
  std::string job_id;
  int requested_rank = -1;          // -1: the coordinator assigns one
  int local_rank = -1;              // -1: unknown
  std::string host;                 // as the launcher named it; empty: gethostname()
  std::string data_address = "127.0.0.1";  // where this worker's Gloo endpoint binds
  std::chrono::milliseconds start_timeout{30000};  // registration waits this long (+10 s)
  // Elastic jobs (HVRUN_ELASTIC=1, set by hvrun): registration may also wait for the next
  // membership, up to elastic_timeout (HVRUN_ELASTIC_TIMEOUT).
  bool elastic = false;
  std::chrono::milliseconds elastic_timeout{600000};
  // A hot spare of an elastic job (HVRUN_ELASTIC_SPARE=1, set by hvrun --spares): init() waits
  // in registration, with no deadline but the job's end, until a lost rank's place is its.
  bool spare = false;
  // Set by hvrun for its elastic jobs (HVRUN_DEATH_WATCH, "<segment>:<slot>"): from init() to
  // shutdown() the worker holds that slot of the launcher's death watch, so that its death is
  // seen as it begins rather than once the process can be reaped. Empty: none.
  std::string death_watch;
  // Bounds every data-plane operation and every wait() without an explicit timeout.
  std::chrono::milliseconds op_timeout{300000};
  std::string log_level = "info";
  bool log_timestamps = true;  // log lines start with the time of day
  // CUDA tensors: allocates library-allocated outputs (see DeviceAllocator in types.h); empty =
  // cudaMallocAsync on the input's stream, freed with cudaFreeAsync when the last owner goes.
  DeviceAllocator device_allocator;
  // What runs CUDA tensors' collectives: "cuda" (the GPU plugin, NCCL) or "host", a plane over
  // host memory shared between the ranks that runs the same GPU executor without a GPU: CUDA
  // tensors' data pointers are host pointers then. For tests and CPU proofs only
  // (HVRUN_DEVICE_PLANE, --device-plane).
  std::string device_plane = "cuda";
  CpuBackendConfig cpu_backend;
  FastPathConfig fast_path;
  TelemetryConfig telemetry;

  // No launcher: init() starts a coordinator of this process's own (the hvrun-coordinator
  // program, as a child it owns and reaps) and runs a job of size 1, as Horovod does for a
  // trainer started without horovodrun. from_environment() sets it when HVRUN_COORDINATOR_ADDR
  // is not set; coordinator_address and secret are then filled by init().
  bool private_coordinator = false;
  // From the environment, for init() to log: HOROVOD_* variables accepted but changing nothing
  // (info), and HOROVOD_* names hvrun does not know (one warning). Empty under hvrun, which
  // printed them already.
  std::vector<std::string> environment_notes;
  std::string environment_warning;

  // Reads HVRUN_* variables (and the settings registry's worker settings, with the HOROVOD_*
  // variables of the same meaning), and CUDA_VISIBLE_DEVICES: the only place the worker library
  // reads the environment for its settings. Errors name the missing or malformed variable.
  static Result<Config> from_environment();
};

// A group of ranks that run collectives among themselves (Horovod's process sets). The global
// set (id 0, the default everywhere) holds every rank; Worker::add_process_set makes others.
// Within a set, collectives follow the contracts above among its members only: sizes, splits,
// reducescatter's rows and Average count the set's ranks; broadcast's root_rank is a job rank
// (a member). Sets negotiate independently: a collective on one set never waits for another
// set's ranks.
struct OpOptions;

struct ProcessSet {
  int32_t id = 0;
  friend bool operator==(const ProcessSet&, const ProcessSet&) = default;
  // A set where a call takes options: allgather_async(name, t, set) runs on `set`.
  operator OpOptions() const;  // NOLINT(google-explicit-constructor)
};

// Per-op timeout (timeout > 0): when the op has not completed within it, this rank aborts the
// job with a reason naming the op and the timeout, and every pending handle (this op's too)
// fails with kAborted. A collective cannot be given up on one rank alone: the others would wait
// for it, or write into buffers the caller was told it may reuse. Use it to bound an op that
// may never complete (a peer that never submits it) well below Config::op_timeout, which still
// bounds the data plane's transfers and wait(). 0 (the default) or less: no timeout of its own.

// Options of the collectives that do not reduce.
struct OpOptions {
  ProcessSet process_set;  // the ranks that take part (default: every rank)
  std::chrono::milliseconds timeout{0};  // see "Per-op timeout" above
};

inline ProcessSet::operator OpOptions() const { return OpOptions{.process_set = *this}; }

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;   // multiplies every input before the reduction
  double postscale = 1.0;  // multiplies the result (after Average's division)
  ProcessSet process_set;  // the ranks that reduce together (default: every rank)
  std::chrono::milliseconds timeout{0};  // see "Per-op timeout" above
};

struct Topology {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
};

class Worker {
 public:
  // Registers with the coordinator (blocks until every rank registered, bounded by the start
  // timeout), connects the data plane and starts the background thread. Installs hvrun's
  // stderr logger (spdlog's default logger, lines tagged with the rank) at Config::log_level.
  static Result<std::unique_ptr<Worker>> init();
  static Result<std::unique_ptr<Worker>> init(const Config& config);

  ~Worker();  // shutdown()
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Fails every pending handle with kCancelled, says Goodbye to the coordinator and stops the
  // background thread. Idempotent; later submissions fail with kFailedPrecondition.
  Status shutdown();
  // shutdown() for a rank that ends because of an error of its own (an uncaught exception in
  // the trainer, a fatal error it detected): instead of Goodbye, this rank reports a failure,
  // and the coordinator aborts the job with the reason
  //   "rank R on host H (pid P) failed: <reason>"
  // (rank R as its cause): every other rank's pending and later handles fail with kAborted and
  // "job aborted: <that reason>", and hvrun reports the job failed with the same text. When
  // the job had already failed (this rank's error may be a consequence of it), nothing more is
  // reported: the coordinator knows the cause. The first of shutdown() and
  // shutdown_with_failure() decides; both are idempotent.
  Status shutdown_with_failure(const std::string& reason);

  // Aborts the whole job: every rank's pending handles fail with kAborted and `reason`.
  void abort(const std::string& reason);

  const Topology& topology() const;
  int rank() const { return topology().rank; }
  int size() const { return topology().size; }
  int local_rank() const { return topology().local_rank; }
  int local_size() const { return topology().local_size; }
  int cross_rank() const { return topology().cross_rank; }
  int cross_size() const { return topology().cross_size; }
  const std::string& job_id() const;
  // Every rank's host, by rank, as the coordinator placed them (empty where it did not say):
  // how many ranks each host runs, without a collective.
  const std::vector<std::string>& rank_hosts() const;

  // ---- Asynchronous collectives. Errors (bad arguments, after shutdown) come back as an
  // ---- already-failed handle, never as an exception.

  // Out of place when input.data != output.data (shapes and dtypes must be equal).
  Handle allreduce_async(const std::string& name, ConstTensorView input, TensorView output,
                         const AllreduceOptions& options = {});
  Handle allreduce_async(const std::string& name, TensorView inout,
                         const AllreduceOptions& options = {});
  // For callers that must wait their own way (language bindings that stay interruptible): runs
  // the allreduce right away on the fast path when it can (the handle is then complete), else
  // submits it as allreduce_async does. Blocking allreduce() is this plus wait().
  Handle allreduce_now_or_async(const std::string& name, const ConstTensorView& input,
                                const TensorView& output, const AllreduceOptions& options = {});
  // The fast path alone, for bindings that wait their own way: when the allreduce may run
  // without the coordinator now (a negotiated, unchanged CPU tensor of the global set, nothing
  // else in flight), runs it and returns its status; else runs nothing and returns nullopt
  // (submit it then). `input` has `output`'s dtype and shape (== output.data: in place).
  std::optional<Status> allreduce_now(const std::string& name, const void* input,
                                      const TensorView& output,
                                      const AllreduceOptions& options = {});
  // In place; the tensors are negotiated together and complete together.
  std::vector<Handle> grouped_allreduce_async(std::span<const std::string> names,
                                              std::span<const TensorView> tensors,
                                              const AllreduceOptions& options = {});
  // Concatenates every rank's tensor along dimension 0 (which may differ per rank; the other
  // dimensions may not). Result: handle.output().
  Handle allgather_async(const std::string& name, ConstTensorView input,
                         const OpOptions& options = {});
  // In place: root's tensor is copied into every rank's `inout`.
  Handle broadcast_async(const std::string& name, TensorView inout, int root_rank,
                         const OpOptions& options = {});
  // splits[r] = rows (first dimension) sent to rank r; empty = equal split (dim 0 divisible by
  // size). Result: handle.output() (rows from every rank, in rank order), received_splits().
  // On a process set, r counts the set's members in ascending order.
  Handle alltoall_async(const std::string& name, ConstTensorView input,
                        std::span<const int64_t> splits = {}, const OpOptions& options = {});
  // Reduces across ranks and scatters dimension 0: rank r gets dim0/size rows, plus one when
  // r < dim0 % size. Result: handle.output().
  Handle reducescatter_async(const std::string& name, ConstTensorView input,
                             const AllreduceOptions& options = {});
  Handle barrier_async(const OpOptions& options = {});
  // Completes when every rank joined; handle.join_result() is the last rank to join. Join is
  // of the global set only (as Horovod's), and takes no options: it waits, by design, for the
  // ranks that still have work.
  Handle join_async();

  // ---- Synchronous wrappers: submit and wait (bounded by Config::op_timeout).
  // A blocking allreduce on a single-host shared-memory job may skip the coordinator: once a
  // tensor was negotiated, and while every rank is idle and calls the same one, the ranks agree
  // in shared memory and reduce right away (--fast-path, README "The fast path").
  Status allreduce(const std::string& name, const TensorView& inout,
                   const AllreduceOptions& options = {});
  Status allreduce(const std::string& name, const ConstTensorView& input, const TensorView& output,
                   const AllreduceOptions& options = {});
  Result<OwnedTensor> allgather(const std::string& name, ConstTensorView input,
                                const OpOptions& options = {});
  Status broadcast(const std::string& name, TensorView inout, int root_rank,
                   const OpOptions& options = {});
  Result<OwnedTensor> alltoall(const std::string& name, ConstTensorView input,
                               std::span<const int64_t> splits = {},
                               const OpOptions& options = {});
  Result<OwnedTensor> reducescatter(const std::string& name, ConstTensorView input,
                                    const AllreduceOptions& options = {});
  Status barrier(const OpOptions& options = {});
  Result<int> join();

  // ---- Process sets (Horovod's dynamic process sets). Every rank of the job calls
  // ---- add_process_set and remove_process_set, in the same order, with the same arguments
  // ---- (they are collectives of the global set), members or not.
  // Makes a set of `ranks` (job ranks, any order, no repeats) and connects its members' data
  // planes (shared memory within a host, Gloo across hosts, NCCL for CUDA tensors). Ids count
  // 1, 2, 3, ... in the order of the calls and are never reused. Refused: an empty list, a
  // rank outside the job, the ranks of a set that exists.
  Result<ProcessSet> add_process_set(std::span<const int> ranks);
  // Refused for the global set, an unknown set, and a set with collectives still in flight.
  Status remove_process_set(ProcessSet process_set);
  // The set's members (ascending job ranks); kNotFound for a set that does not exist (here).
  Result<std::vector<int>> process_set_ranks(ProcessSet process_set) const;
  // Every set that exists now, the global one first.
  std::vector<ProcessSet> process_sets() const;

  // Replaces Config::device_allocator for later CUDA outputs (empty = the default).
  void set_device_allocator(DeviceAllocator allocator);

  // Waits on a handle with the worker's default timeout (Config::op_timeout).
  Status wait(const Handle& handle) const;
  // For callers that wait their own way (language bindings that stay interruptible): what
  // wait() does before it blocks. The submissions this rank still holds back go to the
  // coordinator, or run here, on this thread, when every rank agrees on them without it.
  void send_pending() const;

  // ---- Telemetry (README "Timeline"). mark_step(): one training step done on this rank (the
  // ---- coordinator derives step rate, straggler attribution and the summary from it; cheap:
  // once per step, no system call). mark_phase(name): a named phase of this step starts now
  // ("data", "forward", "backward", ...), ending the one before; "" ends it; mark_step() ends
  // the last. When one rank holds the others back, the coordinator says which of its phases
  // grew (docs/metrics.md "Stragglers").
  // start_timeline(path): the coordinator starts writing the job's timeline (Chrome trace JSON,
  // every rank) to `path` (a relative path means this process's directory, on the launch host);
  // stop_timeline() closes it. Either may be called on any one rank, at any time. They return
  // once the request is sent (an error only when the coordinator cannot be reached); a file the
  // coordinator cannot create is logged there (hvrun's stderr) and recording stays off.
  void mark_step();
  void mark_phase(std::string_view name);
  Status start_timeline(const std::string& path);
  Status stop_timeline();

  // ---- Elastic jobs (hvrun --min-np/--max-np/--host-discovery-script; docs/elastic.md).
  // True once the coordinator said slots were added since this init: the trainer should
  // reset (shutdown, init) at a point where every rank agrees, its next commit
  // (hvrun::elastic::State::commit does so). A lost rank needs no query: every pending and
  // later collective fails with UNAVAILABLE ("the job's membership changed: ...").
  bool hosts_updated() const;

 private:
  explicit Worker(std::unique_ptr<detail::Runtime> runtime);
  // Starts watching `handle` when `timeout` > 0 (per-op timeout); returns it.
  Handle watched(Handle handle, std::chrono::milliseconds timeout, const char* op);
  std::unique_ptr<detail::Runtime> runtime_;
  std::unique_ptr<detail::OpDeadlines> deadlines_;  // after runtime_: stops first
};

// Version of this library: the project version of its build (CMake's project(VERSION), the
// same as build_info().version and the C API's hvrun_version()), e.g. "0.1.0".
const char* version();

// OK when `name` is a valid tensor name (see the contracts above), else kInvalidArgument
// saying what is wrong and where, the name shown escaped. Bindings may call it before
// converting a name; every submission calls it anyway.
Status validate_tensor_name(std::string_view name);
// `name` in double quotes, printable ASCII as is, every other byte as \xNN (at most 200 bytes
// shown): a name as error messages show it.
std::string escaped_tensor_name(std::string_view name);

// Worker::mark_step() on every live Worker of this process (for trainers that do not keep the
// Worker at hand, like Horovod's global API).
void mark_step();
// Worker::mark_phase(name) on every live Worker of this process.
void mark_phase(std::string_view name);

}  // namespace hvrun
