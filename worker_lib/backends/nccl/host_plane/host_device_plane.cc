#include "worker_lib/backends/nccl/host_plane/host_device_plane.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "worker_lib/backends/nccl/host_plane/host_transform.h"
#include "worker_lib/backends/shm/reduce_kernels.h"

namespace hvrun::detail::cuda {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kAlignment = 64;
constexpr int kRemoteError = 6;  // ncclRemoteError: what NCCL reports when a peer failed

std::shared_ptr<void> host_allocation(size_t bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  return std::shared_ptr<void>(std::aligned_alloc(kAlignment, rounded), std::free);
}

std::string bytes_text(size_t bytes) { return std::to_string(bytes) + " bytes"; }

}  // namespace

std::unique_ptr<DevicePlane> make_host_device_plane(const PluginContext& context) {
  return std::make_unique<HostDevicePlane>(context);
}

std::function<Result<std::unique_ptr<DevicePlane>>(const PluginContext&)>
device_plane_factory(const std::string& device_plane) {
  if (device_plane != "host") return nullptr;
  return [](const PluginContext& context) -> Result<std::unique_ptr<DevicePlane>> {
    return make_host_device_plane(context);
  };
}

HostDevicePlane::HostDevicePlane(const PluginContext& context)
    : who_{context.rank, context.size, context.host, ""}, op_timeout_(context.op_timeout) {}

HostDevicePlane::~HostDevicePlane() {
  // A stream held by a caller's stream or a silent peer must not hold the process.
  stop_.store(true);
  if (stream_) stream_->interrupt();
  stream_.reset();
}

std::optional<std::string> HostDevicePlane::abort_reason() const {
  if (!aborted_.load()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  return abort_reason_;
}

std::optional<Status> HostDevicePlane::async_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return async_error_;
}

void HostDevicePlane::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.load()) return;
  abort_reason_ = reason;
  aborted_.store(true);
}

Status HostDevicePlane::fail(Status failure) {
  // ncclCommAbort: the running and queued work ends, the peers learn of it. Every token still
  // polled fails with it: the work before them is skipped, yet their events complete.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_seen_) failure_seen_ = failure;
  }
  if (!failed_) {
    failed_ = failure;
    stop_.store(true);
    if (stream_) stream_->interrupt();
    if (comm_) comm_->poison("rank " + std::to_string(who_.rank) + " on host " + who_.host + ": " + failure.message());
  }
  return failure;
}

std::optional<Status> HostDevicePlane::failure_seen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_seen_;
}

Status HostDevicePlane::usable(const std::string& what) {
  if (failed_) return *failed_;
  if (auto seen = failure_seen()) return fail(*seen);
  if (auto reason = abort_reason())
    return fail(aborted("job aborted: " + *reason + " (before " + what + " on the host plane)"));
  if (ordinal_ < 0) return failed_precondition("host plane used before use_device()");
  return Status::ok();
}

// ---- Devices

Result<std::string> HostDevicePlane::pci_bus_id(int ordinal) {
  if (ordinal != 0) return invalid_argument("host plane: no device " + std::to_string(ordinal) + " (it has one)");
  return "host-memory-pid" + std::to_string(::getpid());
}

Status HostDevicePlane::set_current_device(int ordinal) {
  if (ordinal != 0)
    return invalid_argument("host plane: no device " + std::to_string(ordinal) +
                            " (one per process: cuda:0 is this process's memory)");
  return Status::ok();
}

Status HostDevicePlane::use_device(int ordinal) {
  HVRUN_RETURN_IF_ERROR(set_current_device(ordinal));
  if (ordinal_ >= 0) return Status::ok();
  ordinal_ = ordinal;
  who_.gpu = "host plane device (memory of pid " + std::to_string(::getpid()) + ")";
  stream_ = std::make_unique<HostStream>("hvrun-hplane");
  return Status::ok();
}

// ---- Memory

Result<void*> HostDevicePlane::grow(Buffer& buffer, size_t bytes, const std::string& what) {
  if (bytes <= buffer.capacity) return buffer.memory.get();
  // The old buffer may still be in use by queued work.
  HVRUN_RETURN_IF_ERROR(synchronize("growing the " + what));
  buffer.memory = host_allocation(bytes);
  if (!buffer.memory) return resource_exhausted("host plane: no memory for " + bytes_text(bytes) + " (" + what + ")");
  buffer.capacity = bytes;
  return buffer.memory.get();
}

Result<void*> HostDevicePlane::fusion_buffer(size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("the fusion buffer"));
  return grow(fusion_, bytes, "fusion buffer");
}

Result<void*> HostDevicePlane::scratch_buffer(size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("the scratch buffer"));
  return grow(scratch_, bytes, "scratch buffer");
}

Result<std::shared_ptr<void>> HostDevicePlane::allocate_output(size_t bytes, void*) {
  HVRUN_RETURN_IF_ERROR(usable("an output allocation"));
  if (bytes == 0) return std::shared_ptr<void>();
  auto memory = host_allocation(bytes);
  if (!memory) return resource_exhausted("host plane: no memory for an output of " + bytes_text(bytes));
  return memory;
}

// ---- Stream ordering

Status HostDevicePlane::wait_for(void* caller_stream) {
  HVRUN_RETURN_IF_ERROR(usable("waiting for the caller's stream"));
  if (caller_stream != nullptr) stream_->wait(static_cast<HostStream*>(caller_stream)->record());
  return Status::ok();
}

Status HostDevicePlane::release_to(void* caller_stream) {
  HVRUN_RETURN_IF_ERROR(usable("releasing the result to the caller's stream"));
  if (caller_stream != nullptr) static_cast<HostStream*>(caller_stream)->wait(stream_->record());
  return Status::ok();
}

void HostDevicePlane::enqueue(std::function<Status()> op) {
  stream_->enqueue([this, op = std::move(op)] {
    // After a failure the stream only drains (a CUDA stream after an aborted kernel).
    if (stop_.load()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (async_error_) return;
    }
    Status s = op();
    if (s.is_ok()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!async_error_) async_error_ = std::move(s);
  });
}

// ---- Copies

Status HostDevicePlane::copy_segments(std::span<const Segment> segments, const SegmentTransform& t) {
  HVRUN_RETURN_IF_ERROR(usable("pack/unpack"));
  if (segments.empty()) return Status::ok();
  enqueue([table = std::vector<Segment>(segments.begin(), segments.end()), t] {
    host_copy_segments(table, t);
    return Status::ok();
  });
  return Status::ok();
}

Result<uint64_t> HostDevicePlane::stage_segments(std::span<const Segment> segments, DataType) {
  HVRUN_RETURN_IF_ERROR(usable("staging a segment table"));
  const uint64_t handle = next_staged_++;
  staged_.emplace(handle, std::make_shared<const std::vector<Segment>>(segments.begin(), segments.end()));
  return handle;
}

Status HostDevicePlane::copy_staged(uint64_t table, const SegmentTransform& t) {
  HVRUN_RETURN_IF_ERROR(usable("pack/unpack"));
  auto it = staged_.find(table);
  if (it == staged_.end())
    return internal_error("staged segment table " + std::to_string(table) + " is unknown");
  if (it->second->empty()) return Status::ok();
  enqueue([segments = it->second, t] {
    host_copy_segments(*segments, t);
    return Status::ok();
  });
  return Status::ok();
}

void HostDevicePlane::release_staged(uint64_t table) { staged_.erase(table); }

Status HostDevicePlane::copy_bytes(void* dst, const void* src, size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("a device copy"));
  if (bytes == 0 || dst == src) return Status::ok();
  enqueue([=] {
    std::memmove(dst, src, bytes);
    return Status::ok();
  });
  return Status::ok();
}

Status HostDevicePlane::zero_bytes(void* dst, size_t bytes) {
  HVRUN_RETURN_IF_ERROR(usable("a device memset"));
  if (bytes == 0) return Status::ok();
  enqueue([=] {
    std::memset(dst, 0, bytes);
    return Status::ok();
  });
  return Status::ok();
}

// ---- Communicator

Result<std::string> HostDevicePlane::make_unique_id() { return HostCommunicator::new_id(); }

Status HostDevicePlane::init_communicator(const std::string& unique_id) {
  HVRUN_RETURN_IF_ERROR(usable("communicator init"));
  return attach({.id = unique_id, .rank = who_.rank, .size = who_.size}, "init");
}

Status HostDevicePlane::attach(const HostCommunicatorOptions& options, const std::string& what) {
  auto comm = HostCommunicator::attach(options, aborted_, Clock::now() + op_timeout_);
  if (!comm.is_ok()) {
    if (auto reason = abort_reason())
      return fail(aborted("job aborted: " + *reason + " (during host plane communicator " + what + ")"));
    if (comm.status().code() == StatusCode::kDeadlineExceeded)
      return fail(gpu_timeout_status(who_, "communicator " + what, op_timeout_));
    return fail(comm.status());
  }
  comm_ = std::move(comm).value();
  return Status::ok();
}

Status HostDevicePlane::revoke_communicator() {
  if (!comm_) return failed_precondition("host plane: no communicator to revoke");
  // ncclCommRevoke: this rank's queued and running work ends; the segment is left as it is
  // (the peers are revoked by their own reset, or see this rank gone).
  if (!failed_) failed_ = unavailable("rank " + std::to_string(who_.rank) + " on host " + who_.host +
                                      ": the host plane communicator was revoked for an elastic reset");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_seen_) failure_seen_ = *failed_;
  }
  stop_.store(true);
  if (stream_) stream_->interrupt();
  return Status::ok();
}

Status HostDevicePlane::shrink_communicator(std::span<const int> excluded, const PluginContext& now) {
  if (!comm_) return failed_precondition("host plane: no communicator to shrink");
  HVRUN_RETURN_IF_ERROR(revoke_communicator());
  HVRUN_RETURN_IF_ERROR(check_shrunk_rank(comm_->rank(), comm_->size(), excluded, now));
  // The old membership's stream, failure and abort end here; the new one starts clean.
  stream_.reset();
  failed_.reset();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    async_error_.reset();
    failure_seen_.reset();
    abort_reason_.clear();
    aborted_.store(false);
  }
  stop_.store(false);
  who_ = RankIdentity{now.rank, now.size, now.host, who_.gpu};
  op_timeout_ = now.op_timeout;
  stream_ = std::make_unique<HostStream>("hvrun-hplane");
  return attach({.id = HostCommunicator::shrunk_id(comm_->id(), excluded),
                 .rank = now.rank,
                 .size = now.size,
                 .slot_bytes = comm_->slot_bytes()},
                "shrink");
}

Status HostDevicePlane::enqueue_exchange(const std::string& what,
                                         std::function<Status(HostCommunicator&)> op) {
  HVRUN_RETURN_IF_ERROR(usable(what));
  if (!comm_) return failed_precondition("host plane: " + what + " before the communicator was made");
  enqueue([this, what, op = std::move(op)]() -> Status {
    Status s = op(*comm_);
    if (s.is_ok() || s.code() == StatusCode::kAborted) return s;
    // A peer aborted or died: as NCCL reports it, with the host plane's detail as its last error.
    return nccl_failure_status(who_, NcclFailure{.what = what,
                                                 .code = kRemoteError,
                                                 .code_name = "ncclRemoteError",
                                                 .description = "remote process exited or there was a network error",
                                                 .last_error = s.message()});
  });
  return Status::ok();
}

Status HostDevicePlane::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                  ReduceOp op, bool average) {
  std::string what = "host plane allreduce of " + std::to_string(count) + " " + std::string(dtype_name(dtype));
  const size_t esize = dtype_size(dtype);
  return enqueue_exchange(what, [=, this](HostCommunicator& comm) {
    return comm.exchange(send, count * esize, [&](size_t offset, std::span<const std::byte* const> windows,
                                                  std::span<const size_t> lengths) {
      const size_t n = lengths[0] / esize;
      void* out = static_cast<std::byte*>(recv) + offset;
      // In rank order: every rank gets the same bits.
      shm::reduce_sources(out, reinterpret_cast<const void* const*>(windows.data()), comm.size(), n, dtype, op);
      if (average) host_divide(out, n, dtype, comm.size());
    }, stop_);
  });
}

Status HostDevicePlane::broadcast(const void* send, void* recv, size_t bytes, int root) {
  std::string what = "host plane broadcast of " + bytes_text(bytes) + " from rank " + std::to_string(root);
  const bool is_root = who_.rank == root;
  return enqueue_exchange(what, [=, this](HostCommunicator& comm) {
    return comm.exchange(send, is_root ? bytes : 0, [&](size_t offset, std::span<const std::byte* const> windows,
                                                        std::span<const size_t> lengths) {
      const size_t k = static_cast<size_t>(root);
      if (lengths[k] && !(is_root && send == recv))
        std::memcpy(static_cast<std::byte*>(recv) + offset, windows[k], lengths[k]);
    }, stop_);
  });
}

Status HostDevicePlane::allgatherv(void* buffer, std::span<const size_t> offsets,
                                   std::span<const size_t> bytes) {
  std::string what = "host plane allgather of " + bytes_text(std::accumulate(bytes.begin(), bytes.end(), size_t{0}));
  auto* base = static_cast<std::byte*>(buffer);
  const int me = who_.rank;
  return enqueue_exchange(what, [=, this, offsets = std::vector<size_t>(offsets.begin(), offsets.end()),
                                 sizes = std::vector<size_t>(bytes.begin(), bytes.end())](HostCommunicator& comm) {
    return comm.exchange(base + offsets[static_cast<size_t>(me)], sizes[static_cast<size_t>(me)],
                         [&](size_t offset, std::span<const std::byte* const> windows, std::span<const size_t> lengths) {
      for (size_t k = 0; k < windows.size(); ++k)
        if (static_cast<int>(k) != me && lengths[k]) std::memcpy(base + offsets[k] + offset, windows[k], lengths[k]);
    }, stop_);
  });
}

Status HostDevicePlane::alltoallv(const void* input, std::span<const size_t> send_bytes, void* output,
                                  std::span<const size_t> recv_bytes) {
  std::string what = "host plane alltoall";
  const size_t n = send_bytes.size();
  // The message: this rank's send offsets (n words), then its input, so a peer finds its part.
  const size_t table = n * sizeof(uint64_t);
  const size_t send_total = std::accumulate(send_bytes.begin(), send_bytes.end(), size_t{0});
  auto message = std::make_shared<std::vector<std::byte>>(table + send_total);
  uint64_t at = 0;
  for (size_t k = 0; k < n; ++k) {
    std::memcpy(message->data() + k * sizeof(uint64_t), &at, sizeof at);
    at += send_bytes[k];
  }
  const size_t me = static_cast<size_t>(who_.rank);
  std::vector<size_t> recv(recv_bytes.begin(), recv_bytes.end());
  auto* out = static_cast<std::byte*>(output);
  return enqueue_exchange(what, [=, this](HostCommunicator& comm) {
    // The input is read in stream order (after the caller's stream), so it is copied here.
    if (send_total) std::memcpy(message->data() + table, input, send_total);
    if (table > comm.slot_bytes()) return internal_error("host plane alltoall: too many ranks for its slot");
    std::vector<uint64_t> start(n);  // where peer k's bytes for this rank begin in its message
    std::vector<size_t> out_at(n);
    for (size_t k = 1; k < n; ++k) out_at[k] = out_at[k - 1] + recv[k - 1];
    return comm.exchange(message->data(), message->size(), [&](size_t offset, std::span<const std::byte* const> windows,
                                                               std::span<const size_t> lengths) {
      for (size_t k = 0; k < n; ++k) {
        if (offset == 0) {
          std::memcpy(&start[k], windows[k] + me * sizeof(uint64_t), sizeof(uint64_t));
          start[k] += table;
        }
        const size_t lo = std::max<size_t>(start[k], offset);
        const size_t hi = std::min<size_t>(start[k] + recv[k], offset + lengths[k]);
        if (lo < hi) std::memcpy(out + out_at[k] + (lo - start[k]), windows[k] + (lo - offset), hi - lo);
      }
    }, stop_);
  });
}

// ---- Completion

Status HostDevicePlane::synchronize(const std::string& what) {
  HVRUN_RETURN_IF_ERROR(usable(what));
  std::shared_ptr<HostEvent> done = stream_->record();
  const auto deadline = Clock::now() + op_timeout_;
  for (;;) {
    const bool finished = done->wait_for(std::chrono::milliseconds(1));
    if (auto error = async_error()) return fail(*error);
    if (auto seen = failure_seen()) return fail(*seen);
    if (finished) return Status::ok();
    if (auto reason = abort_reason())
      return fail(aborted("job aborted: " + *reason + " (while " + what + " ran on the host plane)"));
    if (Clock::now() > deadline) return fail(gpu_timeout_status(who_, what, op_timeout_));
  }
}

Result<uint64_t> HostDevicePlane::record_completion() {
  HVRUN_RETURN_IF_ERROR(usable("recording a completion"));
  std::shared_ptr<HostEvent> event = stream_->record();
  std::lock_guard<std::mutex> lock(tokens_mutex_);
  const uint64_t token = next_token_++;
  tokens_.emplace(token, std::move(event));
  return token;
}

std::optional<Status> HostDevicePlane::poll_completion(uint64_t token, const std::string& what,
                                                       Clock::time_point deadline) {
  std::shared_ptr<HostEvent> event;
  {
    std::lock_guard<std::mutex> lock(tokens_mutex_);
    auto it = tokens_.find(token);
    if (it == tokens_.end())
      return internal_error("host plane: completion token " + std::to_string(token) + " is unknown");
    event = it->second;
  }
  // As synchronize(), in its order: a failure on the stream first (the work it skipped still
  // completes the event), then the event, then the abort and the deadline.
  const bool finished = event->done();
  std::optional<Status> failure = async_error();
  if (!failure) failure = failure_seen();
  if (!failure && finished) return Status::ok();
  if (!failure) {
    if (auto reason = abort_reason())
      return aborted("job aborted: " + *reason + " (while " + what + " ran on the host plane)");
    if (Clock::now() <= deadline) return std::nullopt;
    failure = gpu_timeout_status(who_, what, op_timeout_);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_seen_) failure_seen_ = *failure;
  return *failure_seen_;
}

void HostDevicePlane::release_completion(uint64_t token) {
  std::lock_guard<std::mutex> lock(tokens_mutex_);
  tokens_.erase(token);
}

}  // namespace hvrun::detail::cuda
