// The DevicePlane of libhvrun_cuda.so: CUDA runtime (static) and NCCL behind the interface of
// backends/nccl/device_plane.h. See there for the contract; this file only adds how.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "worker_lib/backends/nccl/device_plane.h"
#include "worker_lib/backends/nccl/nccl_errors.h"

namespace hvrun::detail::cuda {

class CudaDevicePlane final : public DevicePlane {
 public:
  explicit CudaDevicePlane(const PluginContext& context);
  ~CudaDevicePlane() override;

  Result<int> device_count() override;
  Result<std::string> pci_bus_id(int ordinal) override;
  Status use_device(int ordinal) override;
  Status set_current_device(int ordinal) override;
  Result<int> current_device() override;
  std::string device_description() const override { return who_.gpu; }
  std::string nccl_version() const override;
  std::string features() const override;

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
  bool has_communicator() const override { return comm_ != nullptr; }
  Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   bool average) override;
  Status broadcast(const void* send, void* recv, size_t bytes, int root) override;
  Status allgatherv(void* buffer, std::span<const size_t> offsets,
                    std::span<const size_t> bytes) override;
  Status alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                   std::span<const size_t> recv_bytes) override;

  Status shrink_support() const override;
  Status revoke_communicator() override;
  Status shrink_communicator(std::span<const int> excluded, const PluginContext& now) override;

  Status synchronize(const std::string& what) override;
  void abort(const std::string& reason) override;
  Result<uint64_t> record_completion() override;
  std::optional<Status> poll_completion(uint64_t token, const std::string& what,
                                        std::chrono::steady_clock::time_point deadline) override;
  void release_completion(uint64_t token) override;

 private:
  Status cuda_status(cudaError_t error, const std::string& what) const;
  Status nccl_status(ncclResult_t result, const std::string& what) const;
  // An NCCL call's result: ncclInProgress is polled (non-blocking communicator) until the
  // call completed, failed, the deadline passed or the job aborted.
  Status nccl_call(ncclResult_t result, const std::string& what);
  // Checks the abort flag and a failed earlier operation before queuing more work.
  Status usable(const std::string& what);
  // Aborts the communicator after `failure`; later calls fail with it. Returns it at once:
  // ncclCommAbort runs on abort_thread_, because it can wait for work queued on the internal
  // stream (e.g. behind a caller's stream that never finishes) and the handle must fail now.
  // In an elastic job that can shrink, a failure other than the op timeout revokes the
  // communicator instead (ncclCommRevoke, on abort_thread_ too), kept for
  // revoke_communicator() and shrink_communicator().
  Status fail(Status failure);
  // Starts ncclCommRevoke on abort_thread_ (once); comm_ stays.
  void start_revoke();
  // Polls comm_ until NCCL says it is quiescent after the revoke, bounded by the op timeout.
  Status wait_until_quiescent();
  Result<void*> grow(void*& buffer, size_t& capacity, size_t bytes, const std::string& what);
  // Copies a chunked table to the device (pinned staging, queued) and returns its device address.
  Result<const Segment*> stage_table(std::span<const Segment> chunks);
  std::optional<std::string> abort_reason() const;
  // A failure poll_completion() found on another thread: the owner's next call (or the wait it
  // is in) makes it the plane's own through fail(), which aborts the communicator.
  std::optional<Status> failure_seen() const;
  // Makes `failure` what every poll_completion() answers from now on (any thread).
  void publish_failure(const Status& failure);
  // Polled by poll_completion(): NCCL's asynchronous error, under comm_mutex_.
  std::optional<Status> async_error_of_comm(const std::string& what);
  // The fusion buffer registered with the communicator (ncclCommRegister) where this NCCL has
  // it; a registration NCCL refuses only leaves the buffer unregistered.
  void register_fusion();
  void deregister_fusion();

  RankIdentity who_;
  std::chrono::milliseconds op_timeout_;
  int ordinal_ = -1;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t caller_ready_ = nullptr;  // recorded on a caller's stream, waited by stream_
  cudaEvent_t done_ = nullptr;          // recorded on stream_, waited by callers and the host
  // Written by the owner's thread under comm_mutex_ where a poller may read it (fail() ends it;
  // init and shrink run with no completion token outstanding).
  ncclComm_t comm_ = nullptr;
  mutable std::mutex comm_mutex_;
  bool elastic_ = false;                // PluginContext::elastic
  bool revoked_ = false;                // comm_ revoked (ncclCommRevoke), awaiting shrink
  std::optional<Status> failed_;        // sticky once the communicator was aborted
  std::thread abort_thread_;            // runs ncclCommAbort after a failure; joined by ~

  void* fusion_ = nullptr;
  size_t fusion_capacity_ = 0;
  void* fusion_registration_ = nullptr;  // ncclCommRegister's handle, while registered
  std::string registration_note_;        // why the fusion buffer is not registered, if it is not
  void* scratch_ = nullptr;
  size_t scratch_capacity_ = 0;
  Segment* host_table_ = nullptr;    // pinned
  Segment* device_table_ = nullptr;
  size_t table_capacity_ = 0;        // entries
  size_t table_used_ = 0;            // entries queued since the last synchronize()
  struct StagedTable {
    Segment* device = nullptr;  // stream-ordered allocation on stream_
    size_t chunks = 0;
  };
  std::unordered_map<uint64_t, StagedTable> staged_;  // by handle
  uint64_t next_staged_ = 1;

  mutable std::mutex abort_mutex_;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;         // abort_mutex_
  std::atomic<bool> failure_flag_{false};
  std::optional<Status> failure_seen_;  // abort_mutex_

  // Completion tokens: an event recorded on stream_ each, reused from spare_events_.
  std::mutex tokens_mutex_;
  std::unordered_map<uint64_t, cudaEvent_t> tokens_;  // tokens_mutex_
  std::vector<cudaEvent_t> spare_events_;             // tokens_mutex_
  uint64_t next_token_ = 1;                           // tokens_mutex_
};

}  // namespace hvrun::detail::cuda
