// Executes the coordinator's responses on CUDA tensors through NCCL: the GPU executor
// (execution/executor.h) that execution/plan_executor.* dispatches to by the response's device.
//
// Per response: make the internal stream wait for the callers' streams (an event each), pack the
// fused tensors into the persistent device fusion buffer in ONE kernel launch (prescale folded
// in, neutral values for joined ranks), run one NCCL collective, unpack in ONE launch (Average's
// division and the postscale folded in; Average of floating types is ncclAvg when every rank
// contributes), make the callers' streams wait for the internal one. The handles complete only
// when the result is on the GPU: execute_then() (the plan executor's way) records a completion
// token and returns, and a thread of its own (gpu_completions.h) finishes the response when the
// token completes, bounded by the op timeout and polling NCCL's asynchronous errors and the job
// abort, so the thread queuing responses never waits for the GPU; execute() waits on the host.
//
// The plugin and the communicator are created lazily, by the first CUDA response (every rank
// executes responses in the same order, so every rank gets here together): load
// libhvrun_cuda.so, select the GPU (the tensor's, or the local rank's for a joined rank), post
// (host, PCI bus id) to the coordinator's key-value store; rank 0 reads every rank's, refuses two
// ranks on one GPU with a clear message, and posts its ncclUniqueId (or that message) for the
// others to read; then a non-blocking ncclCommInitRankConfig. A rank that cannot set up posts its
// error to the store, and rank 0 passes it on, so the others fail at once with it.
//
// Across an elastic reset (communicator_carry.h): an executor ended by a membership change
// revokes its communicator and parks its plane for the next Worker of this process; that one's
// set-up shrinks the parked communicator to the survivors when ranks only left (every rank
// holds the same old communicator, in its old order), and otherwise makes a new plane and a
// new communicator from a new unique id. The "communicator ready" line says which, and why.
//
// Across steps: a fused allreduce's layout and its pack/unpack tables are kept (staged_fusions.h)
// and launched by handle while the step's tensors are the same tensors in the same memory, so a
// steady step (a planned one or one the ranks agreed on without the coordinator: agreement/
// cached_rounds.h) builds and uploads no table. Tables belong to the plane that staged them:
// installing another plane releases them.
//
// Threads: execute() by the thread holding the worker's executor lock (device_plane.h: the
// background thread, or a thread about to wait that runs an agreed round itself); on a thread
// other than the one that set the plane up it makes the GPU current for the call and gives the
// thread its own current device back after. abort(), membership_changed() and
// set_device_allocator() from any thread; carry_communicator_over() on the thread that shuts
// the Worker down, once the background thread has ended.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hvrun.pb.h"
#include "worker_lib/backends/nccl/communicator_carry.h"
#include "worker_lib/backends/nccl/device_plane.h"
#include "worker_lib/backends/nccl/gpu_completions.h"
#include "worker_lib/backends/nccl/staged_fusions.h"
#include "worker_lib/execution/executor.h"
#include "worker_lib/kv_store.h"

namespace hvrun::detail {

struct GpuJob {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string host;
  std::chrono::milliseconds op_timeout{300000};
  std::chrono::milliseconds setup_timeout{30000};  // key-value waits while setting up
  KeyValueStore* store = nullptr;                  // the coordinator's; outlives the executor
  DeviceAllocator allocator;                       // empty: the plugin's cudaMallocAsync
  std::vector<std::string> plugin_candidates;      // empty: cuda::default_plugin_candidates()
  // Makes the plane instead of loading the CUDA plugin: the host-memory plane for
  // Config::device_plane == "host" (host_plane/host_device_plane.h: tests and CPU proofs of this
  // executor), a recording plane in unit tests; empty: cuda::load_device_plane(context,
  // plugin_candidates).
  std::function<Result<std::unique_ptr<cuda::DevicePlane>>(const cuda::PluginContext&)> plane_factory;
  // The global set of an elastic job: the communicator outlives this executor across a reset
  // (communicator_carry.h). Process sets' executors make theirs afresh.
  bool elastic = false;
};

class GpuExecutor final : public Executor {
 public:
  explicit GpuExecutor(GpuJob job);
  ~GpuExecutor();

  // Runs one CUDA response (executor.h) and waits for the GPU. Does not complete handles.
  Status execute(const v1::Response& r, const ResponseEntries& e) override;
  // Queues it and returns; `finish` runs when the GPU finished it (or it failed).
  void execute_then(const v1::Response& r, const ResponseEntries& e,
                    std::function<void(Status)> finish) override;
  // Waits until every response queued so far finished (each is bounded by the op timeout).
  void drain() override { completions_.drain(); }
  // Responses queued and not yet finished (tests).
  size_t in_flight() const { return completions_.in_flight(); }
  // Pack and unpack tables staged so far (tests: a step like the last one stages none).
  uint64_t tables_staged() const { return fusions_.staged(); }

  void abort(const std::string& reason) override;
  // The job's membership changed (an elastic reset follows): fails the running and later
  // operations as abort() does, and makes carry_communicator_over() keep the communicator for
  // the next membership's survivors.
  void membership_changed(const std::string& reason);
  // Called by the Worker's shutdown, which precedes the next init() in every binding (this
  // object itself may go later): after a membership change, parks the plane with its revoked
  // communicator for this process's next Worker, or why it could not (communicator_carry.h).
  // Does nothing after the first call.
  void carry_communicator_over();
  void set_device_allocator(DeviceAllocator allocator);

 private:
  Status run(const v1::Response& r, const ResponseEntries& e);
  // Runs `queue_work` with the plane's GPU current on this thread (see Threads above).
  Status on_plane_device(const std::function<Status()>& queue_work);
  // A completion token failed: the plane's owner (this executor, under call_mutex_) makes the
  // failure the plane's, which aborts the communicator as a failed wait would.
  void take_failure(const std::string& what);
  // How the set-up's ranks make their communicator: rank 0's decision, read by every rank.
  struct Rebuild {
    std::optional<std::vector<int>> shrink;  // the excluded old ranks; nullopt: init from `id`
    std::string id;
    std::string how;
  };
  Status ensure_ready(const std::vector<std::shared_ptr<PendingOp>>& e);
  Status set_up(int ordinal);
  cuda::PluginContext plugin_context() const;
  Result<std::unique_ptr<cuda::DevicePlane>> make_plane();
  void install_plane(std::unique_ptr<cuda::DevicePlane> plane);
  // The one-GPU-per-rank check and rank 0's decision, through the key-value store.
  Result<Rebuild> agree_on_rebuild(const std::string& bus_id, int ordinal);
  // Rank 0: what every rank posted is read, checked and answered.
  Result<Rebuild> answer_as_rank_0();
  Status make_communicator(const Rebuild& rebuild, int ordinal);
  // A carried plane that is not shrunk gives way to a new one, as a first set-up makes.
  Status replace_carried_plane(int ordinal);
  Status check_devices(const std::vector<std::shared_ptr<PendingOp>>& e) const;
  Result<int> local_rank_gpu();
  Result<std::shared_ptr<void>> allocate(const PendingOp& op, size_t bytes);

  Status allreduce(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status reducescatter(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status allgather(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status broadcast(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);
  Status alltoall(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e);

  // Internal stream waits for every entry's stream / every entry's stream waits for it.
  Status wait_for_callers(const std::vector<std::shared_ptr<PendingOp>>& e);
  Status release(const std::vector<std::shared_ptr<PendingOp>>& e);
  // Packs the response's tensors into the fusion buffer, allreduces it and unpacks into
  // `outputs` (counts[i] elements of tensor i from first[i]; first empty: from 0), with the
  // tables kept from an earlier step when the tensors are the same.
  Status reduce_fused(const v1::Response& r, const std::vector<std::shared_ptr<PendingOp>>& e,
                      std::span<void* const> outputs, std::span<const uint64_t> counts,
                      std::span<const uint64_t> first, const cuda::SegmentTransform& unpack);
  int contributors(const v1::Response& r) const;

  GpuJob job_;
  int ordinal_ = -1;                      // the GPU in use once set up
  std::thread::id plane_thread_;          // the thread that set the plane up (its GPU current)
  cuda::StagedFusions fusions_;           // of plane_
  cuda::FusionTensors fusion_tensors_;    // reduce_fused()'s, kept for its capacity
  bool ready_ = false;                    // set up: plugin, GPU, communicator
  bool answered_ = false;                 // rank 0: the others have its id or its error
  std::optional<Status> setup_failure_;  // sticky: set-up is tried once per job
  CommunicatorLineage lineage_;          // of plane_'s communicator (empty tag: none)
  std::string why_not_carried_;          // the last membership kept no communicator: why

  mutable std::mutex mutex_;
  std::unique_ptr<cuda::DevicePlane> plane_;  // written under mutex_ (abort() reads it)
  std::optional<std::string> abort_reason_;   // mutex_
  bool membership_changed_ = false;           // mutex_
  bool carried_over_ = false;                 // mutex_
  DeviceAllocator allocator_;                 // mutex_

  // Held while work is queued on the plane (execute, execute_then, carry_communicator_over),
  // and by take_failure() from the completions' thread.
  std::mutex call_mutex_;
  // Last: destroyed first, draining its responses while the plane is still there.
  GpuCompletions completions_{[this](const std::string& what) { take_failure(what); }};
};

}  // namespace hvrun::detail
