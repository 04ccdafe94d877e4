// The CUDA/NCCL data plane as libhvrun sees it: an interface with no CUDA or NCCL type in it.
//
// libhvrun.so itself never links CUDA or NCCL, so CPU-only jobs run on machines without a
// driver. The implementation lives in the plugin libhvrun_cuda.so (backends/nccl/plugin/,
// linked to static cudart and to libnccl.so.2), which plugin_loader.h dlopens on the first CUDA
// tensor. Both are built from the same tree by the same compiler; kPluginAbiVersion guards
// against mixing builds.
//
// Threads: every method except abort() is called by one thread at a time: the thread holding
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
// the abort flag) until the queued work finished.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "hvrun/types.h"

namespace hvrun::detail::cuda {

inline constexpr int kPluginAbiVersion = 3;
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
};

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

  // ---- Completion and failure
  // Waits until everything queued so far finished on the GPU; `what` names the operation for
  // errors. Bounded by the op timeout; an NCCL error, the timeout or abort() aborts the
  // communicator (ncclCommAbort) and fails with a message naming rank, host, GPU and hints.
  virtual Status synchronize(const std::string& what) = 0;
  virtual void abort(const std::string& reason) = 0;  // any thread
};

}  // namespace hvrun::detail::cuda

// The plugin's two entry points (extern "C", looked up with dlsym).
extern "C" {
using hvrun_cuda_plugin_abi_version_fn = int (*)();
using hvrun_cuda_plugin_create_fn =
    hvrun::detail::cuda::DevicePlane* (*)(const hvrun::detail::cuda::PluginContext* context);
}
