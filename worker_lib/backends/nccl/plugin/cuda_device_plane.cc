#include "worker_lib/backends/nccl/plugin/cuda_device_plane.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "worker_lib/backends/nccl/nccl_types.h"
#include "worker_lib/backends/nccl/plugin/fusion_kernels.h"
#include "worker_lib/backends/nccl/plugin/nccl_optional.h"
#include "worker_lib/backends/nccl/poll_backoff.h"
#include "worker_lib/backends/nccl/segment_table.h"

namespace hvrun::detail::cuda {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBufferRounding = size_t{2} << 20;  // device buffers grow in 2 MiB steps


std::string bytes_text(size_t bytes) { return std::to_string(bytes) + " bytes"; }

}  // namespace

CudaDevicePlane::CudaDevicePlane(const PluginContext& context)
    : who_{context.rank, context.size, context.host, ""}, op_timeout_(context.op_timeout), elastic_(context.elastic) {}

CudaDevicePlane::~CudaDevicePlane() {
  // Runs on whichever thread ends the worker: leave that thread's current device as it was.
  int previous = -1;
  if (ordinal_ >= 0) {
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(ordinal_);
  }
  // Abort rather than destroy: ncclCommDestroy could wait for peers that are gone already. A
  // revoked communicator's revoke finishes first; its registration goes with it.
  if (revoked_) {
    if (abort_thread_.joinable()) abort_thread_.join();
    fusion_registration_ = nullptr;
  }
  deregister_fusion();
  if (comm_) (void)ncclCommAbort(comm_);
  if (abort_thread_.joinable()) abort_thread_.join();  // a failure's abort, before the buffers go
  if (ordinal_ >= 0) {
    // A healthy stream is drained before its buffers go; after a failure it may wait on a
    // caller's stream forever, so it is left alone (the process is ending the job anyway).
    // The staged tables are stream-ordered allocations, freed on the stream it drains.
    if (stream_ && !failed_) {
      for (auto& [handle, table] : staged_)
        if (table.device) (void)cudaFreeAsync(table.device, stream_);
      (void)cudaStreamSynchronize(stream_);
    }
    (void)cudaFree(fusion_);
    (void)cudaFree(scratch_);
    (void)cudaFree(device_table_);
    (void)cudaFreeHost(host_table_);
    for (auto& [token, event] : tokens_) (void)cudaEventDestroy(event);
    for (cudaEvent_t event : spare_events_) (void)cudaEventDestroy(event);
    if (caller_ready_) (void)cudaEventDestroy(caller_ready_);
    if (done_) (void)cudaEventDestroy(done_);
    if (stream_) (void)cudaStreamDestroy(stream_);
    if (previous >= 0) (void)cudaSetDevice(previous);
  }
}

Status CudaDevicePlane::cuda_status(cudaError_t error, const std::string& what) const {
  if (error == cudaSuccess) return Status::ok();
  return cuda_failure_status(who_, what, cudaGetErrorName(error), cudaGetErrorString(error));
}

Status CudaDevicePlane::nccl_status(ncclResult_t result, const std::string& what) const {
  if (result == ncclSuccess) return Status::ok();
  NcclFailure f{.what = what,
                .code = static_cast<int>(result),
                .code_name = nccl_code_name(static_cast<int>(result)),
                .description = ncclGetErrorString(result),
                .last_error = comm_ ? ncclGetLastError(comm_) : ncclGetLastError(nullptr)};
  return nccl_failure_status(who_, f);
}

std::optional<std::string> CudaDevicePlane::abort_reason() const {
  if (!aborted_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return abort_reason_;
}

void CudaDevicePlane::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (aborted_.load()) return;
  abort_reason_ = reason;
  aborted_.store(true);
}

void CudaDevicePlane::start_revoke() {
  if (comm_ == nullptr || revoked_) return;
  revoked_ = true;
  // Off this thread, as ncclCommAbort is (below): the revoke ends this rank's running NCCL work.
  auto revoke = [comm = comm_, ordinal = ordinal_] {
    if (ordinal >= 0) (void)cudaSetDevice(ordinal);
    (void)NcclOptional::get().comm_revoke(comm, NCCL_REVOKE_DEFAULT);
  };
  try {
    abort_thread_ = std::thread(revoke);
  } catch (const std::system_error&) {
    revoke();
  }
}

Status CudaDevicePlane::fail(Status failure) {
  // The survivors of a lost rank shrink this communicator at the elastic reset: a peer's error
  // or the job's abort (which the coordinator sends every rank) revokes it, so its work ends as
  // with an abort, but it stays. The op timeout still aborts: the peers, held in the collective
  // this rank gives up on, learn of it from NCCL at once, not at their own timeout.
  // Every token still polled fails with it: the revoke or abort ends the work before them, so
  // their events may complete with the results never made.
  publish_failure(failure);
  if (comm_ && elastic_ && failure.code() != StatusCode::kDeadlineExceeded && shrink_support().is_ok()) {
    start_revoke();
    if (!failed_) failed_ = failure;
    return failure;
  }
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(comm_mutex_);  // a poller no longer reads it
    comm = std::exchange(comm_, nullptr);
  }
  if (comm && !abort_thread_.joinable()) {
    // Ends NCCL's kernels and peers' connections to this rank. Off this thread: ncclCommAbort
    // may wait for the internal stream, which can be held by a caller's stream (a collective
    // queued behind work that never ends); the handle fails now, not when that work ends.
    try {
      abort_thread_ = std::thread([comm, ordinal = ordinal_] {
        if (ordinal >= 0) (void)cudaSetDevice(ordinal);
        (void)ncclCommAbort(comm);
      });
    } catch (const std::system_error&) {
      (void)ncclCommAbort(comm);  // no thread to be had: abort here
    }
  }
  if (!failed_) failed_ = failure;
  return failure;
}

void CudaDevicePlane::publish_failure(const Status& failure) {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  if (!failure_seen_) failure_seen_ = failure;
  failure_flag_.store(true);
}

std::optional<Status> CudaDevicePlane::failure_seen() const {
  if (!failure_flag_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return failure_seen_;
}

Status CudaDevicePlane::usable(const std::string& what) {
  if (failed_) return *failed_;
  if (auto seen = failure_seen()) return fail(*seen);
  if (auto reason = abort_reason())
    return fail(aborted("job aborted: " + *reason + " (before " + what + " on the GPU)"));
  if (ordinal_ < 0) return failed_precondition("GPU data plane used before use_device()");
  return Status::ok();
}

// ---- Devices

Result<int> CudaDevicePlane::device_count() {
  int count = 0;
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaGetDeviceCount(&count), "cudaGetDeviceCount"));
  return count;
}

Result<std::string> CudaDevicePlane::pci_bus_id(int ordinal) {
  char bus[32] = {};
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal),
                                    "cudaDeviceGetPCIBusId(" + std::to_string(ordinal) + ")"));
  return std::string(bus);
}

Status CudaDevicePlane::set_current_device(int ordinal) {
  return cuda_status(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")");
}

Result<int> CudaDevicePlane::current_device() {
  int ordinal = -1;
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&ordinal), "cudaGetDevice"));
  return ordinal;
}

Status CudaDevicePlane::use_device(int ordinal) {
  if (ordinal_ >= 0) {
    if (ordinal == ordinal_) return set_current_device(ordinal);
    return invalid_argument("rank " + std::to_string(who_.rank) + " uses cuda:" +
                            std::to_string(ordinal_) + " already; cuda:" + std::to_string(ordinal) +
                            " too would be a second GPU (one GPU per rank)");
  }
  HVRUN_RETURN_IF_ERROR(set_current_device(ordinal));
  cudaDeviceProp props{};
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&props, ordinal), "cudaGetDeviceProperties"));
  HVRUN_ASSIGN_OR_RETURN(std::string bus, pci_bus_id(ordinal));
  who_.gpu = "GPU " + std::to_string(ordinal) + " (" + props.name + ", PCI " + bus + ")";
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                                    "cudaStreamCreateWithFlags"));
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&caller_ready_, cudaEventDisableTiming),
                                    "cudaEventCreateWithFlags"));
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                                    "cudaEventCreateWithFlags"));
  ordinal_ = ordinal;
  return Status::ok();
}

std::string CudaDevicePlane::nccl_version() const {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}

// ---- Memory

Result<void*> CudaDevicePlane::grow(void*& buffer, size_t& capacity, size_t bytes,
                                    const std::string& what) {
  if (bytes <= capacity) return buffer;
  // The old buffer may still be in use by queued work.
  HVRUN_RETURN_IF_ERROR(synchronize("growing the " + what));
  if (buffer) HVRUN_RETURN_IF_ERROR(cuda_status(cudaFree(buffer), "cudaFree of the " + what));
  buffer = nullptr;
  capacity = 0;
  size_t rounded = (bytes + kBufferRounding - 1) / kBufferRounding * kBufferRounding;
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaMalloc(&buffer, rounded),
                                    "cudaMalloc of " + bytes_text(rounded) + " for the " + what));
  capacity = rounded;
  return buffer;
}

Result<void*> CudaDevicePlane::fusion_buffer(size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("the fusion buffer"));
  if (bytes <= fusion_capacity_) return fusion_;
  // The registration goes before the memory, once no queued work uses it.
  HVRUN_RETURN_IF_ERROR(synchronize("growing the fusion buffer"));
  deregister_fusion();
  HVRUN_ASSIGN_OR_RETURN(void* buffer, grow(fusion_, fusion_capacity_, bytes, "fusion buffer"));
  register_fusion();
  return buffer;
}

void CudaDevicePlane::register_fusion() {
  const NcclOptional& nccl = NcclOptional::get();
  if (comm_ == nullptr || fusion_ == nullptr || fusion_registration_ != nullptr) return;
  if (nccl.comm_register == nullptr) {
    registration_note_ = "this NCCL has no ncclCommRegister";
    return;
  }
  void* handle = nullptr;
  ncclResult_t r = nccl.comm_register(comm_, fusion_, fusion_capacity_, &handle);
  // A non-blocking communicator may finish the registration later: polled, briefly.
  const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(op_timeout_, std::chrono::seconds(10));
  PollBackoff backoff;
  while (r == ncclInProgress && Clock::now() < deadline) {
    backoff.pause();
    if (ncclCommGetAsyncError(comm_, &r) != ncclSuccess) r = ncclInternalError;
  }
  if (r == ncclSuccess && handle != nullptr) {
    fusion_registration_ = handle;
    registration_note_.clear();
  } else {
    registration_note_ = std::string("ncclCommRegister refused it: ") + ncclGetErrorString(r);
  }
}

void CudaDevicePlane::deregister_fusion() {
  if (fusion_registration_ == nullptr) return;
  if (comm_ != nullptr) (void)NcclOptional::get().comm_deregister(comm_, fusion_registration_);
  fusion_registration_ = nullptr;  // an aborted communicator released it with itself
}

Status CudaDevicePlane::shrink_support() const {
  const NcclOptional& nccl = NcclOptional::get();
  if (nccl.comm_revoke != nullptr && nccl.comm_shrink != nullptr) return Status::ok();
  return failed_precondition("this NCCL (" + nccl_version() + ") has no " +
                             (nccl.comm_revoke == nullptr ? "ncclCommRevoke" : "ncclCommShrink") +
                             " (NCCL 2.28.7 and later have both)");
}

Status CudaDevicePlane::wait_until_quiescent() {
  if (abort_thread_.joinable()) abort_thread_.join();
  const auto deadline = Clock::now() + op_timeout_;
  PollBackoff backoff;
  for (;;) {
    // Quiescent is anything but in progress: an error the lost rank left is the shrink's to
    // handle (NCCL_SHRINK_ABORT).
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state != ncclInProgress) return Status::ok();
    if (Clock::now() > deadline) return gpu_timeout_status(who_, "revoking the communicator (ncclCommRevoke)", op_timeout_);
    backoff.pause();
  }
}

Status CudaDevicePlane::revoke_communicator() {
  if (comm_ == nullptr)
    return failed_precondition("rank " + std::to_string(who_.rank) + ": no NCCL communicator to revoke (none was "
                               "made, or it was aborted)");
  HVRUN_RETURN_IF_ERROR(shrink_support());
  HVRUN_RETURN_IF_ERROR(set_current_device(ordinal_));
  if (!revoked_) {
    deregister_fusion();  // while the communicator is healthy
    start_revoke();
    if (!failed_)
      failed_ = unavailable("rank " + std::to_string(who_.rank) + " on host " + who_.host +
                            ": the NCCL communicator was revoked for an elastic reset");
  }
  return wait_until_quiescent();
}

Status CudaDevicePlane::shrink_communicator(std::span<const int> excluded, const PluginContext& now) {
  HVRUN_RETURN_IF_ERROR(revoke_communicator());
  HVRUN_RETURN_IF_ERROR(check_shrunk_rank(who_.rank, who_.size, excluded, now));
  // The old membership's failure and abort end here.
  failed_.reset();
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    abort_reason_.clear();
    aborted_.store(false);
    failure_seen_.reset();
    failure_flag_.store(false);
  }
  who_ = RankIdentity{now.rank, now.size, now.host, who_.gpu};
  op_timeout_ = now.op_timeout;
  elastic_ = now.elastic;
  std::vector<int> list(excluded.begin(), excluded.end());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // polled, as init is
  ncclComm_t parent = comm_, child = nullptr;
  // NCCL_SHRINK_ABORT: the parent may hold the lost rank's error; its operations end first.
  ncclResult_t r = NcclOptional::get().comm_shrink(parent, list.data(), static_cast<int>(list.size()), &child,
                                                   &config, NCCL_SHRINK_ABORT);
  {
    std::lock_guard<std::mutex> lock(comm_mutex_);
    comm_ = child;
  }
  revoked_ = false;
  fusion_registration_ = nullptr;  // it was the parent's, and goes with it
  Status made = nccl_call(r, "communicator shrink (ncclCommShrink, " + std::to_string(list.size()) +
                                 " rank(s) excluded, " + std::to_string(now.size) + " left)");
  (void)ncclCommAbort(parent);  // revoked and quiescent: frees it without waiting for anyone
  HVRUN_RETURN_IF_ERROR(made);
  register_fusion();
  return Status::ok();
}

std::string CudaDevicePlane::features() const {
  const NcclOptional& nccl = NcclOptional::get();
  std::string s = "fusion buffer ";
  if (fusion_registration_ != nullptr) s += "registered (ncclCommRegister)";
  else if (nccl.comm_register != nullptr && registration_note_.empty()) s += "registered with NCCL once made (ncclCommRegister)";
  else s += "unregistered (" + (registration_note_.empty() ? std::string("this NCCL has no ncclCommRegister") : registration_note_) + ")";
  Status shrink = shrink_support();
  s += shrink.is_ok() ? "; elastic reset: shrink (ncclCommRevoke + ncclCommShrink) when ranks only leave, else abort and init"
                      : "; elastic reset: abort and init (" + shrink.message() + ")";
  return s;
}

Result<void*> CudaDevicePlane::scratch_buffer(size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("the scratch buffer"));
  return grow(scratch_, scratch_capacity_, bytes, "scratch buffer");
}

Result<std::shared_ptr<void>> CudaDevicePlane::allocate_output(size_t bytes, void* stream) {
  HVRUN_RETURN_IF_ERROR(usable("an output allocation"));
  if (bytes == 0) return std::shared_ptr<void>();
  void* p = nullptr;
  auto s = static_cast<cudaStream_t>(stream);
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaMallocAsync(&p, bytes, s),
                                    "cudaMallocAsync of " + bytes_text(bytes) + " for an output"));
  // Freed in the order of the stream the result is ready on (types.h: OwnedTensor).
  return std::shared_ptr<void>(p, [s](void* q) { (void)cudaFreeAsync(q, s); });
}

// ---- Stream ordering

Status CudaDevicePlane::wait_for(void* caller_stream) {
  HVRUN_RETURN_IF_ERROR(usable("waiting for the caller's stream"));
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaEventRecord(caller_ready_, static_cast<cudaStream_t>(caller_stream)),
                                    "cudaEventRecord on the tensor's stream"));
  return cuda_status(cudaStreamWaitEvent(stream_, caller_ready_, 0), "cudaStreamWaitEvent");
}

Status CudaDevicePlane::release_to(void* caller_stream) {
  HVRUN_RETURN_IF_ERROR(usable("releasing the result to the caller's stream"));
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaEventRecord(done_, stream_), "cudaEventRecord"));
  return cuda_status(cudaStreamWaitEvent(static_cast<cudaStream_t>(caller_stream), done_, 0),
                     "cudaStreamWaitEvent on the tensor's stream");
}

// ---- Copies

Result<const Segment*> CudaDevicePlane::stage_table(std::span<const Segment> chunks) {
  if (table_used_ + chunks.size() > table_capacity_) {
    // The ring wraps: its entries may still be read by queued launches until the GPU is here.
    if (table_used_ > 0) HVRUN_RETURN_IF_ERROR(synchronize("reusing the segment table"));
    table_used_ = 0;
  }
  if (chunks.size() > table_capacity_) {
    size_t capacity = std::max({chunks.size(), table_capacity_ * 2, size_t{4096}});
    (void)cudaFreeHost(host_table_);
    (void)cudaFree(device_table_);
    host_table_ = nullptr;
    device_table_ = nullptr;
    table_capacity_ = 0;
    HVRUN_RETURN_IF_ERROR(cuda_status(cudaMallocHost(reinterpret_cast<void**>(&host_table_), capacity * sizeof(Segment)),
                                      "cudaMallocHost for the segment table"));
    HVRUN_RETURN_IF_ERROR(cuda_status(cudaMalloc(reinterpret_cast<void**>(&device_table_), capacity * sizeof(Segment)),
                                      "cudaMalloc for the segment table"));
    table_capacity_ = capacity;
  }
  // Entries already queued stay untouched until synchronize() saw the copies done.
  Segment* host = host_table_ + table_used_;
  Segment* device = device_table_ + table_used_;
  std::memcpy(host, chunks.data(), chunks.size() * sizeof(Segment));
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(device, host, chunks.size() * sizeof(Segment),
                                                    cudaMemcpyHostToDevice, stream_),
                                    "cudaMemcpyAsync of the segment table"));
  table_used_ += chunks.size();
  return device;
}

Status CudaDevicePlane::copy_segments(std::span<const Segment> segments, const SegmentTransform& t) {
  HVRUN_RETURN_IF_ERROR(usable("pack/unpack"));
  if (segments.empty()) return Status::ok();
  const size_t esize = dtype_size(t.dtype);
  std::vector<Segment> chunks = split_segments(segments, std::max<uint64_t>(kChunkBytes / esize, 1), esize);
  if (chunks.empty()) return Status::ok();
  HVRUN_ASSIGN_OR_RETURN(const Segment* table, stage_table(chunks));
  return cuda_status(launch_copy_segments(table, chunks.size(), t, stream_),
                     "pack/unpack kernel launch (" + std::to_string(chunks.size()) + " chunks)");
}

Result<uint64_t> CudaDevicePlane::stage_segments(std::span<const Segment> segments, DataType dtype) {
  HVRUN_RETURN_IF_ERROR(usable("staging a segment table"));
  const size_t esize = dtype_size(dtype);
  std::vector<Segment> chunks = split_segments(segments, std::max<uint64_t>(kChunkBytes / esize, 1), esize);
  StagedTable table{nullptr, chunks.size()};
  if (!chunks.empty()) {
    const size_t bytes = chunks.size() * sizeof(Segment);
    void* memory = nullptr;
    HVRUN_RETURN_IF_ERROR(cuda_status(cudaMallocAsync(&memory, bytes, stream_),
                                      "cudaMallocAsync for a staged segment table"));
    table.device = static_cast<Segment*>(memory);
    // From pageable memory: the driver takes its own copy before returning, so `chunks` may go.
    // This runs once per new layout, never on a step that reuses one.
    Status copied = cuda_status(cudaMemcpyAsync(table.device, chunks.data(), bytes,
                                                cudaMemcpyHostToDevice, stream_),
                                "cudaMemcpyAsync of a staged segment table");
    if (!copied.is_ok()) {
      (void)cudaFreeAsync(table.device, stream_);
      return copied;
    }
  }
  const uint64_t handle = next_staged_++;
  staged_.emplace(handle, table);
  return handle;
}

Status CudaDevicePlane::copy_staged(uint64_t table, const SegmentTransform& t) {
  HVRUN_RETURN_IF_ERROR(usable("pack/unpack"));
  auto it = staged_.find(table);
  if (it == staged_.end())
    return internal_error("staged segment table " + std::to_string(table) + " is unknown");
  if (it->second.chunks == 0) return Status::ok();
  return cuda_status(launch_copy_segments(it->second.device, it->second.chunks, t, stream_),
                     "pack/unpack kernel launch (" + std::to_string(it->second.chunks) +
                         " staged chunks)");
}

void CudaDevicePlane::release_staged(uint64_t table) {
  auto it = staged_.find(table);
  if (it == staged_.end()) return;
  // Stream-ordered: the launches queued before it still read the table.
  if (it->second.device) (void)cudaFreeAsync(it->second.device, stream_);
  staged_.erase(it);
}

Status CudaDevicePlane::copy_bytes(void* dst, const void* src, size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("a device copy"));
  if (bytes == 0 || dst == src) return Status::ok();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
                     "cudaMemcpyAsync device to device");
}

Status CudaDevicePlane::zero_bytes(void* dst, size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("a device memset"));
  if (bytes == 0) return Status::ok();
  return cuda_status(cudaMemsetAsync(dst, 0, bytes, stream_), "cudaMemsetAsync");
}

// ---- NCCL

Status CudaDevicePlane::nccl_call(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return Status::ok();
  if (result != ncclInProgress || comm_ == nullptr) return fail(nccl_status(result, what));
  const auto deadline = Clock::now() + op_timeout_;
  PollBackoff backoff;
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t polled = ncclCommGetAsyncError(comm_, &state);
    if (polled != ncclSuccess) return fail(nccl_status(polled, "ncclCommGetAsyncError after " + what));
    if (state == ncclSuccess) return Status::ok();
    if (state != ncclInProgress) return fail(nccl_status(state, what));
    if (auto seen = failure_seen()) return fail(*seen);
    if (auto reason = abort_reason())
      return fail(aborted("job aborted: " + *reason + " (during NCCL " + what + ")"));
    if (Clock::now() > deadline) return fail(gpu_timeout_status(who_, what, op_timeout_));
    backoff.pause();
  }
}

Result<std::string> CudaDevicePlane::make_unique_id() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return nccl_status(r, "ncclGetUniqueId");
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

Status CudaDevicePlane::init_communicator(const std::string& unique_id) {
  HVRUN_RETURN_IF_ERROR(usable("communicator init"));
  if (unique_id.size() != sizeof(ncclUniqueId))
    return internal_error("NCCL unique id of " + std::to_string(unique_id.size()) + " bytes, expected " +
                          std::to_string(sizeof(ncclUniqueId)) + " (rank 0 runs another NCCL version?)");
  ncclUniqueId id;
  std::memcpy(&id, unique_id.data(), sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every step polled: abortable on job abort and the op timeout
  HVRUN_RETURN_IF_ERROR(set_current_device(ordinal_));
  ncclResult_t r = ncclCommInitRankConfig(&comm_, who_.size, id, who_.rank, &config);
  HVRUN_RETURN_IF_ERROR(nccl_call(r, "communicator init (ncclCommInitRankConfig, " + std::to_string(who_.size) + " ranks)"));
  register_fusion();
  return Status::ok();
}

Status CudaDevicePlane::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                  ReduceOp op, bool average) {
  std::string what = "ncclAllReduce of " + std::to_string(count) + " " + std::string(dtype_name(dtype));
  HVRUN_RETURN_IF_ERROR(usable(what));
  return nccl_call(ncclAllReduce(send, recv, count, to_nccl(dtype), to_nccl(op, average), comm_, stream_), what);
}

Status CudaDevicePlane::broadcast(const void* send, void* recv, size_t bytes, int root) {
  std::string what = "ncclBroadcast of " + bytes_text(bytes) + " from rank " + std::to_string(root);
  HVRUN_RETURN_IF_ERROR(usable(what));
  return nccl_call(ncclBroadcast(send, recv, bytes, ncclUint8, root, comm_, stream_), what);
}

Status CudaDevicePlane::allgatherv(void* buffer, std::span<const size_t> offsets,
                                   std::span<const size_t> bytes) {
  auto* base = static_cast<unsigned char*>(buffer);
  const size_t n = bytes.size();
  bool equal = n > 0;
  for (size_t k = 0; k < n && equal; ++k) equal = bytes[k] == bytes[0] && offsets[k] == k * bytes[0];
  if (equal) {
    std::string what = "ncclAllGather of " + bytes_text(bytes[0]) + " per rank";
    HVRUN_RETURN_IF_ERROR(usable(what));
    const size_t mine = static_cast<size_t>(who_.rank);
    return nccl_call(ncclAllGather(base + offsets[mine], base, bytes[0], ncclUint8, comm_, stream_), what);
  }
  // Uneven first dimensions: one broadcast per rank, grouped into one NCCL launch.
  std::string what = "allgather of uneven blocks (grouped ncclBroadcast)";
  HVRUN_RETURN_IF_ERROR(usable(what));
  HVRUN_RETURN_IF_ERROR(nccl_call(ncclGroupStart(), "ncclGroupStart"));
  ncclResult_t first_error = ncclSuccess;
  for (size_t k = 0; k < n; ++k) {
    if (bytes[k] == 0) continue;
    ncclResult_t r = ncclBroadcast(base + offsets[k], base + offsets[k], bytes[k], ncclUint8,
                                   static_cast<int>(k), comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
  }
  ncclResult_t end = ncclGroupEnd();
  if (first_error != ncclSuccess) return fail(nccl_status(first_error, what));
  return nccl_call(end, what);
}

Status CudaDevicePlane::alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                                  std::span<const size_t> recv_bytes) {
  std::string what = "alltoall (grouped ncclSend/ncclRecv)";
  HVRUN_RETURN_IF_ERROR(usable(what));
  const auto* in = static_cast<const unsigned char*>(input);
  auto* out = static_cast<unsigned char*>(output);
  HVRUN_RETURN_IF_ERROR(nccl_call(ncclGroupStart(), "ncclGroupStart"));
  ncclResult_t first_error = ncclSuccess;
  size_t sent = 0, received = 0;
  for (size_t k = 0; k < send_bytes.size(); ++k) {
    ncclResult_t r = ncclSuccess;
    if (send_bytes[k]) r = ncclSend(in + sent, send_bytes[k], ncclUint8, static_cast<int>(k), comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
    if (recv_bytes[k]) r = ncclRecv(out + received, recv_bytes[k], ncclUint8, static_cast<int>(k), comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
    sent += send_bytes[k];
    received += recv_bytes[k];
  }
  ncclResult_t end = ncclGroupEnd();
  if (first_error != ncclSuccess) return fail(nccl_status(first_error, what));
  return nccl_call(end, what);
}

// ---- Completion

Status CudaDevicePlane::synchronize(const std::string& what) {
  HVRUN_RETURN_IF_ERROR(usable(what));
  HVRUN_RETURN_IF_ERROR(cuda_status(cudaEventRecord(done_, stream_), "cudaEventRecord"));
  const auto deadline = Clock::now() + op_timeout_;
  PollBackoff backoff;
  while (true) {
    cudaError_t q = cudaEventQuery(done_);
    if (q == cudaSuccess) {
      table_used_ = 0;  // every staged table was consumed
      return Status::ok();
    }
    if (q != cudaErrorNotReady) return fail(cuda_status(q, what));
    if (comm_) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
          state != ncclInProgress)
        return fail(nccl_status(state, what));
    }
    if (auto seen = failure_seen()) return fail(*seen);
    if (auto reason = abort_reason())
      return fail(aborted("job aborted: " + *reason + " (while " + what + " ran on the GPU)"));
    if (Clock::now() > deadline) return fail(gpu_timeout_status(who_, what, op_timeout_));
    backoff.pause();
  }
}

Result<uint64_t> CudaDevicePlane::record_completion() {
  HVRUN_RETURN_IF_ERROR(usable("recording a completion"));
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(tokens_mutex_);
    if (!spare_events_.empty()) {
      event = spare_events_.back();
      spare_events_.pop_back();
    }
  }
  if (event == nullptr)
    HVRUN_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                                      "cudaEventCreateWithFlags for a completion"));
  Status recorded = cuda_status(cudaEventRecord(event, stream_), "cudaEventRecord of a completion");
  std::lock_guard<std::mutex> lock(tokens_mutex_);
  if (!recorded.is_ok()) {
    spare_events_.push_back(event);
    return recorded;
  }
  const uint64_t token = next_token_++;
  tokens_.emplace(token, event);
  return token;
}

std::optional<Status> CudaDevicePlane::async_error_of_comm(const std::string& what) {
  std::lock_guard<std::mutex> lock(comm_mutex_);
  if (comm_ == nullptr) return std::nullopt;
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess &&
      state != ncclInProgress)
    return nccl_status(state, what);
  return std::nullopt;
}

std::optional<Status> CudaDevicePlane::poll_completion(uint64_t token, const std::string& what,
                                                       Clock::time_point deadline) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(tokens_mutex_);
    auto it = tokens_.find(token);
    if (it == tokens_.end())
      return internal_error("GPU data plane: completion token " + std::to_string(token) + " is unknown");
    event = it->second;
  }
  // The poller's thread queries the plane's device (the first poll makes it current there).
  thread_local int current = -1;
  if (current != ordinal_ && cudaSetDevice(ordinal_) == cudaSuccess) current = ordinal_;
  // As synchronize(), in its order: the event, then NCCL's error, the abort, the deadline.
  std::optional<Status> failure = failure_seen();
  if (!failure) {
    const cudaError_t q = cudaEventQuery(event);
    // A failure published meanwhile may have ended the work before the event: it wins.
    if (q == cudaSuccess) {
      if (auto seen = failure_seen()) return *seen;
      return Status::ok();
    }
    if (q != cudaErrorNotReady) failure = cuda_status(q, what);
  }
  if (!failure) failure = async_error_of_comm(what);
  if (!failure) {
    if (auto reason = abort_reason())
      return aborted("job aborted: " + *reason + " (while " + what + " ran on the GPU)");
    if (Clock::now() <= deadline) return std::nullopt;
    failure = gpu_timeout_status(who_, what, op_timeout_);
  }
  publish_failure(*failure);
  return *failure_seen();
}

void CudaDevicePlane::release_completion(uint64_t token) {
  std::lock_guard<std::mutex> lock(tokens_mutex_);
  auto it = tokens_.find(token);
  if (it == tokens_.end()) return;
  spare_events_.push_back(it->second);
  tokens_.erase(it);
}

}  // namespace hvrun::detail::cuda
