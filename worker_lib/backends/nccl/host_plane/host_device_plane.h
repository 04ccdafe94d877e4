// The DevicePlane (../device_plane.h) over host memory: what the GPU executor sees of CUDA and
// NCCL, done by the CPU, so that multi-rank jobs run the GPU executor's own code on machines
// without GPUs (tests and CPU proofs; selected with --device-plane host / HVRUN_DEVICE_PLANE=host,
// never a substitute for a GPU in training).
//
// As on a GPU: "device memory" is this process's memory (a CUDA tensor's data pointer is a host
// pointer); every operation is queued, in call order, on one internal stream (a HostStream: one
// thread); wait_for()/release_to() order it against a caller's stream (nullptr: always ready,
// or a HostStream* of the caller's); the collectives run through a communicator of all ranks
// over shared memory (host_communicator.h: the "unique id" is its segment's name), reductions in
// rank order; a failure on the stream is an asynchronous error that synchronize() finds, as
// ncclCommGetAsyncError; synchronize() and poll_completion() are bounded by the op timeout (a
// failure poll_completion() sees on another thread is the plane's own at the owner's next
// call, which aborts the communicator, as the CUDA plane does); abort() and every failure
// abort the communicator, which the peers see as ncclRemoteError and every later call fails
// with. Grouped NCCL calls (uneven allgather, alltoall) are one exchange here. An elastic reset
// whose ranks only left shrinks the communicator as ncclCommShrink does: the survivors attach to
// a child segment whose name they derive from the old one (no new unique id), in their old order.
//
// One "GPU" per process: device_count() is 1 and the PCI bus id names the process, so the
// executor's one-GPU-per-rank check holds for any number of ranks per host.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "worker_lib/backends/nccl/device_plane.h"
#include "worker_lib/backends/nccl/host_plane/host_communicator.h"
#include "worker_lib/backends/nccl/host_plane/host_stream.h"
#include "worker_lib/backends/nccl/nccl_errors.h"

namespace hvrun::detail::cuda {

class HostDevicePlane final : public DevicePlane {
 public:
  explicit HostDevicePlane(const PluginContext& context);
  ~HostDevicePlane() override;

  Result<int> device_count() override { return 1; }
  Result<std::string> pci_bus_id(int ordinal) override;
  Status use_device(int ordinal) override;
  Status set_current_device(int ordinal) override;
  Result<int> current_device() override { return 0; }  // the process's one device
  std::string device_description() const override { return who_.gpu; }
  std::string nccl_version() const override { return "host plane"; }
  std::string features() const override {
    return "no NCCL: buffers are host memory; elastic reset: shrink (the survivors' communicator "
           "made from the old one) when ranks only leave, else init";
  }

  Result<void*> fusion_buffer(size_t bytes) override;
  Result<void*> scratch_buffer(size_t bytes) override;
  Result<std::shared_ptr<void>> allocate_output(size_t bytes, void* stream) override;

  Status wait_for(void* caller_stream) override;
  Status release_to(void* caller_stream) override;

  Status copy_segments(std::span<const Segment> segments, const SegmentTransform& t) override;
  Status copy_bytes(void* dst, const void* src, size_t bytes) override;
  Status zero_bytes(void* dst, size_t bytes) override;
  Result<uint64_t> stage_segments(std::span<const Segment> segments, DataType dtype) override;
  Status copy_staged(uint64_t table, const SegmentTransform& t) override;
  void release_staged(uint64_t table) override;

  Result<std::string> make_unique_id() override;
  Status init_communicator(const std::string& unique_id) override;
  bool has_communicator() const override { return comm_ != nullptr && !failed_; }
  Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   bool average) override;
  Status broadcast(const void* send, void* recv, size_t bytes, int root) override;
  Status allgatherv(void* buffer, std::span<const size_t> offsets,
                    std::span<const size_t> bytes) override;
  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override;

  Status shrink_support() const override { return Status::ok(); }
  Status revoke_communicator() override;
  Status shrink_communicator(std::span<const int> excluded, const PluginContext& now) override;

  Status synchronize(const std::string& what) override;
  void abort(const std::string& reason) override;
  Result<uint64_t> record_completion() override;
  std::optional<Status> poll_completion(uint64_t token, const std::string& what,
                                        std::chrono::steady_clock::time_point deadline) override;
  void release_completion(uint64_t token) override;

 private:
  struct Buffer {
    std::shared_ptr<void> memory;
    size_t capacity = 0;
  };
  Status usable(const std::string& what);
  Status fail(Status failure);
  Result<void*> grow(Buffer& buffer, size_t bytes, const std::string& what);
  // Attaches comm_ to the communicator `options` name (`what`: "init", "shrink"), bounded by
  // the op timeout and the abort; a failure aborts the plane.
  Status attach(const HostCommunicatorOptions& options, const std::string& what);
  // Queues `op` on the internal stream; its failure becomes the asynchronous error.
  void enqueue(std::function<Status()> op);
  // Queues one exchange of the communicator (a collective); `what` names it in errors.
  Status enqueue_exchange(const std::string& what, std::function<Status(HostCommunicator&)> op);
  std::optional<Status> async_error() const;
  std::optional<std::string> abort_reason() const;
  // A failure poll_completion() found, which the owner's next call makes the plane's own.
  std::optional<Status> failure_seen() const;

  RankIdentity who_;
  std::chrono::milliseconds op_timeout_;
  int ordinal_ = -1;
  std::unique_ptr<HostCommunicator> comm_;
  std::optional<Status> failed_;       // the executor lock's holder: sticky once aborted
  std::atomic<bool> stop_{false};      // ends the stream's running and queued exchanges
  Buffer fusion_, scratch_;
  // Staged tables by handle; a queued copy holds its table until it ran.
  std::unordered_map<uint64_t, std::shared_ptr<const std::vector<Segment>>> staged_;
  uint64_t next_staged_ = 1;

  mutable std::mutex mutex_;
  std::optional<Status> async_error_;  // mutex_: the first failure on the stream
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;           // mutex_
  std::optional<Status> failure_seen_;  // mutex_
  // Completion tokens by handle (tokens_mutex_: the poller's thread reads them).
  std::mutex tokens_mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<HostEvent>> tokens_;
  uint64_t next_token_ = 1;  // tokens_mutex_

  // Last: the stream's thread uses everything above, so it stops first.
  std::unique_ptr<HostStream> stream_;
};

// Makes the host plane for one rank.
std::unique_ptr<DevicePlane> make_host_device_plane(const PluginContext& context);

// What GpuJob::plane_factory takes for `device_plane` (Config::device_plane): this plane for
// "host", empty (the CUDA plugin) otherwise. The runtime picks the plane, so the executor (which
// this folder builds on) never includes this one.
std::function<Result<std::unique_ptr<DevicePlane>>(const PluginContext&)>
device_plane_factory(const std::string& device_plane);

}  // namespace hvrun::detail::cuda
