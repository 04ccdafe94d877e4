// The CUDA/NCCL data plane as libhvrun sees it: an interface with no CUDA or NCCL type in it.
//
// libhvrun.so itself never links CUDA or NCCL, so CPU-only jobs run on machines without a
// driver. The implementation lives in the plugin libhvrun_cuda.so (backends/nccl/plugin/,
// linked to static cudart and to libnccl.so.2), which plugin_loader.h dlopens on the first CUDA
// tensor. Both are built from the same tree by the same compiler; kPluginAbiVersion guards
// against mixing builds.
//
// Threads: every method except abort(), poll_completion() and release_completion() (any
// thread) is called by one thread at a time (the GPU executor's call lock orders them): the
// completion thread, to have the plane take a failure a poll saw (synchronize()), or the
// thread holding
// the worker's executor lock (agreement/execution_lane.h). That is the background thread for
// plans, and for rounds the ranks agreed on (agreement/cached_rounds.h) either it or a thread
// about to wait on a handle, which runs the round itself instead of waking the background
// thread. The GPU executor makes the plane's GPU current on a thread other than the one that
// set the plane up, for its calls, and gives that thread its own current device back after
// (set_current_device, current_device). abort() may come from any thread and makes the running
// and every later operation fail promptly with kAborted.
//
// Ordering: everything is queued on one internal CUDA stream, in call order. wait_for() makes
// that stream wait for a caller's stream, release_to() makes a caller's stream wait for the
// internal one, synchronize() waits on the host (bounded, polling NCCL's asynchronous errors and
// the abort flag) until the queued work finished. A completion token marks the work queued so
// far; poll_completion() says, without waiting, whether it finished, and is the one method
// (with abort() and release_completion()) that another thread may call while the owner queues
// more: responses complete off the thread that queues them, which never waits for the GPU.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "common/status.h"
#include "hvrun/types.h"

namespace hvrun::detail::cuda {

inline constexpr int kPluginAbiVersion = 4;
inline constexpr const char* kPluginFileName = "libhvrun_cuda.so";
inline constexpr const char* kPluginCreateSymbol = "hvrun_cuda_plugin_create";
inline constexpr const char* kPluginAbiSymbol = "hvrun_cuda_plugin_abi_version";

// One piece of a pack or unpack: `count` elements from `src` to `dst` (device pointers).
// src == nullptr writes the neutral value of the reduction instead (joined ranks).
struct Segment {
  const void* src = nullptr;
  void* dst = nullptr;
  uint64_t count = 0;
};

// How every element of a copy_segments() call is transformed:
//   v = src; v = v / divisor (when divisor > 1; integer types truncate); v = v * scale.
struct SegmentTransform {
  DataType dtype = DataType::kFloat32;
  double scale = 1.0;
  int64_t divisor = 1;
  ReduceOp neutral_op = ReduceOp::kSum;  // which neutral value src == nullptr writes
};

// Who this process is, for error messages and the communicator.
struct PluginContext {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  std::string host;
  std::chrono::milliseconds op_timeout{300000};
  // An elastic job: a failure revokes the communicator instead of destroying it, where the
  // plane can shrink (shrink_support()), so that the survivors of a lost rank can shrink it.
  bool elastic = false;
};

// A survivor's rank in the communicator shrunk without the old ranks `excluded` (ascending):
// its old rank less the excluded ranks below it (NCCL's order); -1 when `old_rank` is excluded.
inline int rank_after_shrink(int old_rank, std::span<const int> excluded) {
  int below = 0;
  for (int r : excluded) {
    if (r == old_rank) return -1;
    if (r < old_rank) ++below;
  }
  return old_rank - below;
}

// Ok when rank `old_rank` of `old_size`, less `excluded`, is who `now` says this process is.
inline Status check_shrunk_rank(int old_rank, int old_size, std::span<const int> excluded,
                                const PluginContext& now) {
  if (rank_after_shrink(old_rank, excluded) == now.rank &&
      old_size - static_cast<int>(excluded.size()) == now.size)
    return Status::ok();
  return internal_error("communicator shrink: rank " + std::to_string(old_rank) + " of " +
                        std::to_string(old_size) + " less " + std::to_string(excluded.size()) +
                        " excluded rank(s) is not rank " + std::to_string(now.rank) + " of " +
                        std::to_string(now.size) + " (protocol error)");
}

class DevicePlane {
 public:
  virtual ~DevicePlane() = default;

  // ---- Devices
  // Number of CUDA devices this process sees; an error naming the cause (no driver, ...).
  virtual Result<int> device_count() = 0;
  // "0000:3b:00.0"
  virtual Result<std::string> pci_bus_id(int ordinal) = 0;
  // Makes `ordinal` current on the calling thread; the first call also creates the internal
  // stream and events on it. Later calls with another ordinal fail (one GPU per rank).
  virtual Status use_device(int ordinal) = 0;
  // Makes `ordinal` current on the calling thread only (cudaSetDevice); no other state.
  virtual Status set_current_device(int ordinal) = 0;
  // The device current on the calling thread (cudaGetDevice), to give it back afterwards.
  virtual Result<int> current_device() = 0;
  // "GPU 0 (NVIDIA H200, PCI 0000:3b:00.0)" of the device in use.
  virtual std::string device_description() const = 0;
  // "2.28.9" of the libnccl.so.2 actually loaded.
  virtual std::string nccl_version() const = 0;
  // What of the optional NCCL features this plane uses, and how an elastic reset rebuilds the
  // communicator, for the log line that says the communicator is ready.
  virtual std::string features() const = 0;

  // ---- Memory (device memory of the device in use)
  // The persistent fusion and scratch buffers: grown when too small, never shrunk. Growing
  // waits for the queued work first.
  virtual Result<void*> fusion_buffer(size_t bytes) = 0;
  virtual Result<void*> scratch_buffer(size_t bytes) = 0;
  // A library-allocated output: stream-ordered allocation on `stream` (cudaMallocAsync); the
  // deleter frees it on that stream.
  virtual Result<std::shared_ptr<void>> allocate_output(size_t bytes, void* stream) = 0;

  // ---- Stream ordering
  virtual Status wait_for(void* caller_stream) = 0;
  virtual Status release_to(void* caller_stream) = 0;

  // ---- Copies, one kernel launch per call for the whole table
  virtual Status copy_segments(std::span<const Segment> segments, const SegmentTransform& t) = 0;
  virtual Status copy_bytes(void* dst, const void* src, size_t bytes) = 0;  // D2D, queued
  virtual Status zero_bytes(void* dst, size_t bytes) = 0;                   // queued

  // ---- Staged segment tables: a table kept by the plane (on a GPU: in device memory, uploaded
  // once) and launched by handle, so that a step whose fused layout and tensors are those of an
  // earlier step builds, splits and uploads nothing.
  // Stages `segments` of `dtype` elements (the upload is queued); the handle is never 0.
  virtual Result<uint64_t> stage_segments(std::span<const Segment> segments, DataType dtype) = 0;
  // Queues what copy_segments(the staged segments, t) would; t.dtype is the staged dtype.
  virtual Status copy_staged(uint64_t table, const SegmentTransform& t) = 0;
  // The table is no longer launched; its memory goes once the work queued so far is done.
  virtual void release_staged(uint64_t table) = 0;

  // ---- NCCL (collectives queued on the internal stream)
  virtual Result<std::string> make_unique_id() = 0;
  // Non-blocking ncclCommInitRankConfig, polled until ready, the abort or the op timeout.
  virtual Status init_communicator(const std::string& unique_id) = 0;
  virtual bool has_communicator() const = 0;
  // average: ncclAvg (floating types only); otherwise `op` (Average is never passed).
  virtual Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                           bool average) = 0;
  virtual Status broadcast(const void* send, void* recv, size_t bytes, int root) = 0;
  // In place in `buffer`: rank k's block is offsets[k] .. offsets[k] + bytes[k] and this rank's
  // block is already there. Equal blocks: ncclAllGather; otherwise grouped ncclBroadcast.
  virtual Status allgatherv(void* buffer, std::span<const size_t> offsets,
                            std::span<const size_t> bytes) = 0;
  // Grouped ncclSend/ncclRecv: send_bytes[k] consecutive bytes of `input` to rank k,
  // recv_bytes[k] from rank k consecutively into `output`.
  virtual Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                           std::span<const size_t> recv_bytes) = 0;

  // ---- Elastic reset: the survivors' communicator made from the old one
  // When the job's membership changes and ranks only left, the survivors keep their plane
  // (device, stream, buffers) and shrink its communicator, as NCCL's ncclCommShrink does: no new
  // unique id, no bootstrap of the ranks from scratch. When ranks joined, or the plane cannot
  // shrink, the executor makes a new plane and a new communicator (abort and init).
  //
  // Ok when shrink_communicator() works here; otherwise why not (the NCCL loaded has no
  // ncclCommRevoke/ncclCommShrink).
  virtual Status shrink_support() const = 0;
  // Stops the communicator's work without freeing it (ncclCommRevoke; already done when a
  // failure of an elastic job revoked it), waiting until it is quiescent, bounded by the op
  // timeout. Every operation fails after it until shrink_communicator(). Any thread that owns
  // the plane; not concurrently with its other calls.
  virtual Status revoke_communicator() = 0;
  // Makes the survivors' communicator from the revoked one (ncclCommShrink), then frees the old
  // one. `excluded`: the old ranks that left, ascending, the same list on every survivor; every
  // survivor calls it (a collective of the survivors). A survivor's rank in the new
  // communicator is its old rank less the excluded ranks below it, and `now` (who this process
  // is in the new membership) must say the same. The failure and abort of the old membership
  // are cleared; device, stream and buffers stay. Bounded by now.op_timeout and abort().
  virtual Status shrink_communicator(std::span<const int> excluded, const PluginContext& now) = 0;

  // ---- Completion and failure
  // Waits until everything queued so far finished on the GPU; `what` names the operation for
  // errors. Bounded by the op timeout; an NCCL error, the timeout or abort() aborts the
  // communicator (ncclCommAbort) and fails with a message naming rank, host, GPU and hints.
  virtual Status synchronize(const std::string& what) = 0;
  virtual void abort(const std::string& reason) = 0;  // any thread

  // ---- Completion tokens
  // A token for everything queued so far (an event recorded on the internal stream); never 0.
  virtual Result<uint64_t> record_completion() = 0;
  // Any thread, concurrently with the owner's calls; never waits. nullopt while the work before
  // `token` runs; OK once it finished; otherwise the failure synchronize() would have returned
  // (NCCL's asynchronous error, abort(), `deadline` passed), the communicator aborted as there.
  // `what` names the operation in the failure.
  virtual std::optional<Status> poll_completion(uint64_t token, const std::string& what,
                                                std::chrono::steady_clock::time_point deadline) = 0;
  // Any thread: the token is polled no more.
  virtual void release_completion(uint64_t token) = 0;
};

}  // namespace hvrun::detail::cuda

// The plugin's two entry points (extern "C", looked up with dlsym).
extern "C" {
using hvrun_cuda_plugin_abi_version_fn = int (*)();
using hvrun_cuda_plugin_create_fn =
    hvrun::detail::cuda::DevicePlane* (*)(const hvrun::detail::cuda::PluginContext* context);
}
